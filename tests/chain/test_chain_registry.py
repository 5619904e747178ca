"""ModelRegistry: registration, specs and their byte sizes, author-only updates, deprecation."""

import pytest
from chainkit import reverts, tiny_model
from web3.logs import DISCARD

from cvm.chain.contracts import call_struct, deploy, register_model, tensor_spec

pytestmark = pytest.mark.chain


def test_registered_model_matches_the_cvm_model(env):
    m = call_struct(env.registry.functions.getModel(env.model.hash))
    assert m["author"] == env.deployer.address and not m["deprecated"]
    assert m["gas"] == env.model.gas
    assert (m["inputBytes"], m["outputBytes"]) == (4, 3 * env.model.outputs[0].dtype.itemsize)
    assert tuple(m["input"]) == (list(env.model.inputs[0].shape[1:]), env.model.inputs[0].bits)
    assert env.registry.functions.isActive(env.model.hash).call()


def test_register_validates(env):
    reg, author = env.registry, env.player
    spec = ([1, 28, 28], 8)
    with reverts("AlreadyRegistered"):
        env.register(author, env.model.hash, "x", spec, spec, 1, bytes(32))
    with reverts("ZeroModelHash"):
        env.register(author, bytes(32), "x", spec, spec, 1, bytes(32))
    with reverts("ZeroGas"):
        env.register(author, b"\x01" * 32, "x", spec, spec, 0, bytes(32))
    for bad in (([], 8), ([3, 0], 8), ([3], 0), ([3], 33), ([4096, 4096, 2], 32)):
        with reverts("InvalidTensorSpec"):
            env.register(author, b"\x01" * 32, "x", bad, spec, 1, bytes(32))
    r = env.register(author, b"\x01" * 32, "ipfs://m", spec, ([10], 21), 1234, b"\x07" * 32)
    ev = reg.events.ModelRegistered().process_receipt(r, errors=DISCARD)[0]["args"]
    assert (ev["author"], ev["uri"], ev["gas"]) == (author.address, "ipfs://m", 1234)
    assert reg.functions.inputBytes(b"\x01" * 32).call() == 784
    assert reg.functions.outputBytes(b"\x01" * 32).call() == 40


def test_only_the_author_updates_or_deprecates(env):
    reg, h = env.registry, env.model.hash
    with reverts("NotAuthor"):
        env.send(env.player, reg.functions.updateURI(h, "evil://"))
    with reverts("NotAuthor"):
        env.send(env.player, reg.functions.deprecate(h))
    with reverts("UnknownModel"):
        env.send(env.player, reg.functions.deprecate(b"\x09" * 32))
    env.send(env.deployer, reg.functions.updateURI(h, "ipfs://new"))
    assert call_struct(reg.functions.getModel(h))["uri"] == "ipfs://new"
    env.send(env.deployer, reg.functions.deprecate(h))
    assert not reg.functions.isActive(h).call()
    with reverts("AlreadyDeprecated"):
        env.send(env.deployer, reg.functions.deprecate(h))


def test_tensor_spec_of_a_cvm_model(env):
    assert tensor_spec(env.model.inputs[0]) == ([4], 8)


def test_calibration_hash_comes_from_the_model_metadata(env):
    model = tiny_model({"calibration_hash": "0x" + "ab" * 32})
    assert model.hash == env.model.hash  # metadata is not hashed: register it in a fresh registry
    fresh, _ = deploy(env.w3, env.deployer, "ModelRegistry")
    register_model(fresh, env.player, model)
    assert call_struct(fresh.functions.getModel(model.hash))["calibrationHash"] == b"\xab" * 32


def test_registration_cannot_be_front_run(env):
    """Attack: a squatter copies a pending `register` (the hash is in the mempool) and registers the
    model first with false metadata. Registration is commit-reveal: the squatter has no older
    commitment, and cannot commit and register in one block."""
    reg, author, squatter = env.registry, env.player, env.operators[3]
    h, spec, salt = b"\x0a" * 32, ([4], 8), b"\x0b" * 32
    commitment = reg.functions.registrationCommitment(h, author.address, salt).call()
    env.send(author, reg.functions.commitRegistration(commitment))
    with reverts("RegistrationNotCommitted"):  # the author's commitment binds the author's address
        env.send(squatter, reg.functions.register(h, "evil://", spec, spec, 1, bytes(32), salt))
    # the squatter commits and registers in the same block (one transaction here): too early
    squatter_contract, _ = env.deploy_test("Squatter")
    with reverts("RegistrationTooEarly"):
        env.send(squatter, squatter_contract.functions.squat(reg.address, h, spec, salt), gas=500_000, abi=reg.abi)
    env.send(author, reg.functions.register(h, "ipfs://real", spec, spec, 77, bytes(32), salt))
    assert call_struct(reg.functions.getModel(h))["author"] == author.address
    with reverts("AlreadyRegistered"):  # the squatter's own commitment is worthless now
        env.send(squatter, reg.functions.register(h, "evil://", spec, spec, 1, bytes(32), salt))

