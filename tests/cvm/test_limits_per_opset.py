"""Size limits per opset: opset 1 keeps its shipped values; opset 2 admits VGG-16, ViT-B/16 and a
1024x1024 detector; a graph is written in the lowest opset whose ops and limits admit it, so every
existing model keeps its opset and hash; decoding and verification apply the graph's own opset's limits."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import cvm
from cvm import limits
from cvm.format import check_file_size, decode_graph, encode_graph, graph_to_obj
from cvm.ir import Graph, Input, Node
from cvm.limits import LIMITS, Footprint
from cvm.ops import LATEST_OPSET, OPSETS, REPRICES, lowest_opset
from cvm.verify import Verifier

ROOT = Path(__file__).parents[2]
VGG16_FC6 = 25088 * 4096  # 102,760,448: VGG-16's largest weight
VGG16_PARAMS = 138_357_544
VIT_B16_PARAMS = 86_567_656


def test_opset_1_keeps_its_shipped_limits():
    assert LIMITS[1] == limits.Limits(file_bytes=1 << 28, nodes=4096, tensor_elements=1 << 24,
                                      constant_elements=1 << 24, total_constant_elements=1 << 26,
                                      activation_bytes=1 << 28, run_bytes=1 << 31)


def test_every_opset_has_limits_and_they_never_shrink():
    assert set(LIMITS) == set(OPSETS)
    chosen = sorted(set(LIMITS) - set(REPRICES))  # the opsets lowest_opset picks from: none shrinks
    for old, new in zip(chosen, chosen[1:]):
        assert all(a is b is None or a <= b for a, b in zip(vars(LIMITS[old]).values(), vars(LIMITS[new]).values())), (old, new)
    # a repricing opset keeps its base's size limits; opset 4 also bounds a node's inputs
    for opset, base in REPRICES.items():
        assert replace(LIMITS[opset], node_inputs=None) == LIMITS[base]
    assert LIMITS[4].node_inputs == limits.MAX_NODE_INPUTS and all(LIMITS[o].node_inputs is None for o in (1, 2, 3))
    assert limits.NEWEST == LIMITS[LATEST_OPSET] and limits.MAX_FILE_BYTES == limits.NEWEST.file_bytes
    for lim in LIMITS.values():
        assert lim.run_bytes >= lim.activation_bytes  # batch 1 of the largest model runs


@pytest.mark.parametrize("name, footprint", [
    ("VGG-16", Footprint(nodes=80, largest_tensor=64 * 224 * 224, largest_constant=VGG16_FC6,
                         constant_elements=VGG16_PARAMS, activation_bytes=60 << 20)),
    ("ViT-B/16", Footprint(nodes=1500, largest_tensor=12 * 197 * 197, largest_constant=768 * 3072,
                           constant_elements=VIT_B16_PARAMS, activation_bytes=200 << 20)),
    # ResNet-50 at 1024x1024: converted at 224, 116,424,560 activation bytes per sample and a largest
    # tensor of 802,816 elements; both scale with (1024/224)^2; a detector's FPN and heads add ~25%.
    ("1024x1024 ResNet-50 detector", Footprint(nodes=600, largest_tensor=64 * 514 * 514, largest_constant=2359296,
                                               constant_elements=40_000_000,
                                               activation_bytes=int(116_424_560 * (1024 / 224) ** 2 * 1.25))),
])
def test_opset_2_admits_large_models_that_opset_1_refuses(name, footprint):
    assert footprint.excess(LIMITS[1]) is not None
    assert footprint.excess(LIMITS[2]) is None
    assert lowest_opset({"conv2d", "dense", "relu", "requant"}, footprint) == 2


def test_lowest_opset_follows_ops_then_limits():
    small = Footprint(nodes=10, largest_constant=100, constant_elements=100)
    assert lowest_opset({"dense", "relu"}) == lowest_opset({"dense", "relu"}, small) == 1
    assert lowest_opset({"dense"}, Footprint(nodes=4097)) == 2
    assert lowest_opset({"dense"}, Footprint(largest_tensor=LIMITS[2].tensor_elements + 1)) == LATEST_OPSET
    assert Footprint(nodes=4097).excess(LIMITS[1]) == "4097 nodes > 4096"


def _dense_graph(rows, opset=None):
    w = np.ones((rows, 4096), np.int8)
    return Graph([Input("x", (4096,), 8)], {"w": w}, [Node("dense", ("x", "w"), "y")], ["y"], opset)


def test_a_graph_with_a_constant_over_opset_1s_limit_is_written_in_opset_2():
    g = _dense_graph(4097)  # 16,781,312 elements > 2^24
    assert g.opset == 2
    model = cvm.Model(g)
    again = cvm.loads(model.to_bytes())
    assert again.graph.opset == 2 and again.hash == model.hash
    small = _dense_graph(16)
    assert small.opset == 1 and cvm.Model(small).graph.opset == 1


def test_opset_1_refuses_it_at_decode_and_at_verification():
    g = _dense_graph(4097, opset=1)
    with pytest.raises(cvm.FormatError, match="constant 'w' has 16781312 elements > limit 16777216"):
        decode_graph(encode_graph(g))
    with pytest.raises(cvm.LimitError, match="16781312 elements > 16777216"):
        cvm.Model(g)


def test_decode_checks_a_constant_against_its_opsets_limit_before_making_it():
    obj = graph_to_obj(_dense_graph(16, opset=2))
    obj["constants"][0][2] = [LIMITS[2].constant_elements // 1024 + 1, 1024]  # claims more than opset 2 admits
    import msgpack
    with pytest.raises(cvm.FormatError, match=f"> limit {LIMITS[2].constant_elements}"):
        decode_graph(msgpack.packb(obj, use_bin_type=True))


def test_file_size_is_checked_against_the_graphs_opset():
    check_file_size(LIMITS[1].file_bytes, 1)
    check_file_size(LIMITS[1].file_bytes + 1, 2)
    with pytest.raises(cvm.FormatError, match=f"> limit {LIMITS[1].file_bytes} of opset 1"):
        check_file_size(LIMITS[1].file_bytes + 1, 1)


def test_activations_over_opset_1_pick_opset_2_when_the_verifiers_footprint_is_given():
    """Activation sizes need the shape rules: a builder given the incremental verifier's footprint (as
    MRT's quantizer does) picks the opset that admits them; without it the graph is opset 1 and refused."""
    b = cvm.GraphBuilder()
    v = Verifier(LATEST_OPSET)
    x = b.input("x", (1, 4096, 4096), 8)  # 2^24: within opset 1
    v.add_input(b.inputs[-1])
    y = b.op("pad", x, pads=(0, 0, 0, 0, 0, 2), value=0)  # 4096 x 4098 > 2^24
    v.add_node(b.nodes[-1])
    assert v.footprint().largest_tensor == 4096 * 4098
    assert cvm.Model(b.graph(y, footprint=v.footprint())).graph.opset == 2
    with pytest.raises(cvm.LimitError, match="limits.elements"):
        cvm.Model(b.graph(y))


def test_every_committed_model_keeps_its_opset():
    """Each committed .cvm, rebuilt without an explicit opset, gets the opset its file names; one in an
    opset that only reprices another (opset 3: conformance suite v3) is written only by naming it, and
    rebuilt without it gets an opset no newer than the one repriced."""
    from cvm.ops import REPRICES
    paths = sorted(ROOT.glob("fixtures/**/*.cvm"))
    assert len(paths) > 20
    for path in paths:
        g = cvm.load(path).graph
        chosen = Graph(g.inputs, g.constants, g.nodes, g.outputs).opset
        assert chosen == g.opset or (g.opset in REPRICES and chosen <= REPRICES[g.opset]), path
