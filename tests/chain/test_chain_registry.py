"""ModelRegistry: registration, specs and their byte sizes, author-only updates, deprecation; listings per
publisher, referee commitments replaced after a delay, the dispute gas (issue 27)."""

from dataclasses import dataclass

import numpy as np
import pytest
from chainkit import BACKEND, CONFIG, Env, reverts, tiny_model
from web3.logs import DISCARD

import cvm
from cvm.chain import dispute_cost
from cvm.chain import model_commitment as mc
from cvm.chain.contracts import call_struct, deploy, deploy_oracle, register_listing, register_model, tensor_spec
from cvm.chain.embedded import EmbeddedChain
from cvm.chain.node import Operator, Status
from cvm.chain.store import ModelStore

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



# ------------------------------------------------------------------------ listings (issue 27, registry)

REFEREE_DELAY = 3 * 86_400  # ModelRegistry.REFEREE_DELAY


@dataclass
class Listed:
    """An oracle on an embedded chain where a squatter registered the model first (the listing whose id
    is its hash) and its author then published its own listing, and three staked operators."""
    env: Env
    squatter: object
    author: object
    listing: bytes

    def request(self, listing: bytes, x: np.ndarray) -> int:
        env = self.env
        r = env.send(env.player, env.oracle.functions.request(listing, env.model.encode_input(x), env.player.address),
                     value=env.oracle.functions.feeFor(listing).call())
        return env.oracle.events.InferenceRequested().process_receipt(r, errors=DISCARD)[0]["args"]["requestId"]


def listed(tmp_path, precompile: bool, squat=None) -> Listed:
    """`precompile`: the chain's trace precompile knows the model; without, disputes go to the
    Solidity referee and operators check the listing's referee commitment (as on anvil)."""
    store = ModelStore(tmp_path / "models")
    model = store.get(store.put(tiny_model()))
    chain = EmbeddedChain(store if precompile else ModelStore(tmp_path / "chain"), backend=BACKEND, num_accounts=10)
    dep = deploy_oracle(chain.w3, chain.keys[0], CONFIG)
    env = Env(chain, store, model, dep, CONFIG)
    squatter, author = chain.keys[7], chain.keys[8]
    (squat or (lambda env: register_model(dep.registry, squatter, model)))(env)  # first, with what it likes
    listing, _ = register_listing(dep.registry, author, model, "ipfs://real")
    env.stake_all()
    return Listed(env, squatter, author, listing)


def operators(env, tmp_path, first=Operator) -> list[Operator]:
    return [(first if i == 0 else Operator)(env.w3, env.operators[i], env.oracle.address, env.store,
                                            tmp_path / f"op{i}.sqlite", backend=BACKEND, retry_delay=0.0)
            for i in range(3)]


def serve(env, ops, rid: int) -> dict:
    """The operators step until the request is settled; its state and each operator's note."""
    for _ in range(8):
        for op in ops:
            op.step()
        if env.request_state(rid)["status"] != Status.PENDING:
            break
        env.open_reveals(rid)
    return {"state": env.request_state(rid), "notes": [op.job(rid).note for op in ops if op.job(rid)]}


def test_a_listing_is_its_publishers_and_names_its_file(env):
    reg, model, author, other = env.registry, env.model, env.player, env.operators[3]
    listing, r = register_listing(reg, author, model)
    assert listing == reg.functions.listingId(model.hash, author.address).call() != model.hash
    ev = reg.events.ListingRegistered().process_receipt(r, errors=DISCARD)[0]["args"]
    assert (ev["id"], ev["modelHash"], ev["publisher"]) == (listing, model.hash, author.address)
    assert reg.functions.modelHashOf(listing).call() == model.hash == reg.functions.modelHashOf(model.hash).call()
    assert reg.functions.terms(listing).call() == reg.functions.terms(model.hash).call()  # same specs, own entry
    with reverts("AlreadyRegistered"):  # one listing per publisher and file
        register_listing(reg, author, model)
    with reverts("NotAuthor"):
        env.send(other, reg.functions.deprecate(listing))
    env.send(author, reg.functions.deprecate(listing))
    assert not reg.functions.isActive(listing).call() and reg.functions.isActive(model.hash).call()
    assert reg.functions.disputeGas(listing).call() == 0


def test_a_listing_id_registered_as_a_model_hash_is_replaced(env):
    """Attack: a listing id is predictable (the file's hash and the publisher's address), so a griefer
    registers it first as if it were a model hash. No file hashes to a listing id, so the publisher's
    listing replaces that registration."""
    reg, model, author, griefer = env.registry, env.model, env.player, env.operators[3]
    target = reg.functions.listingId(model.hash, author.address).call()
    env.register(griefer, target, "evil://", ([1], 8), ([1], 8), 1, bytes(32))
    env.send(griefer, reg.functions.commitReferee(target, (b"\x01" * 32, 2, 1, b""), 1))
    listing, _ = register_listing(reg, author, model)
    m = call_struct(reg.functions.getModel(listing))
    assert listing == target and (m["author"], m["gas"], m["uri"]) == (author.address, model.gas, f"cvm:{model.hash.hex()}")
    assert reg.functions.refereeCommitment(listing).call()[0] == bytes(32)
    assert reg.functions.modelHashOf(listing).call() == model.hash
    with reverts("AlreadyRegistered"):
        env.register(griefer, target, "evil://", ([1], 8), ([1], 8), 1, bytes(32))


def test_a_squatter_of_a_public_model_cannot_lock_its_users_out(tmp_path):
    """Attack: a squatter registers an already public model first, with false specs and gas, and
    deprecates it. Its author publishes its own listing; honest operators refuse the squatter's and
    serve a request on the author's end to end."""
    def squat(env):  # specs of the right byte sizes, but a gas of 1: a fee that pays for nothing
        env.register(env.chain.keys[7], env.model.hash, "evil://", ([2, 2], 8), ([3], 32), 1, bytes(32))

    case = listed(tmp_path, precompile=True, squat=squat)
    env, model, x = case.env, case.env.model, np.array([[3, -7, 11, 100]], np.int8)
    ops = operators(env, tmp_path)
    refused = serve(env, ops, case.request(model.hash, x))
    assert refused["state"]["status"] == Status.PENDING and all("not served" in n for n in refused["notes"]), refused
    env.send(case.squatter, env.registry.functions.deprecate(model.hash))
    with reverts("ModelNotAvailable"):
        case.request(model.hash, x)
    served = serve(env, ops, case.request(case.listing, x))
    assert served["state"]["status"] == Status.FINALIZED, served
    assert bytes(served["state"]["outputHash"]) == cvm.output_hash(model.run(x, backend=BACKEND))


def test_a_garbage_referee_root_harms_only_its_own_listing(tmp_path):
    """Attack: on a chain without the trace precompile the squatter commits a garbage referee root on
    the listing it holds. Operators refuse that listing and keep serving the author's (a dispute on a
    listing, judged with its own commitment by the referee: tests/chain/test_chain_dispute_cost.py)."""
    case = listed(tmp_path, precompile=False)
    env, model = case.env, case.env.model
    env.send(case.squatter, env.registry.functions.commitReferee(model.hash, (b"\x01" * 32, 2, 1, b""), 1))
    with pytest.raises(mc.RefereeMismatch, match="is not the model's"):
        mc.require_served(env.w3, env.registry, model)
    mc.publish(env.w3, env.registry, case.author, model, listing=case.listing)
    mc.require_served(env.w3, env.registry, model, case.listing)
    x = np.array([[5, 6, -7, 8]], np.int8)

    ops = operators(env, tmp_path)
    refused = serve(env, ops, case.request(model.hash, x))
    assert all("not served" in n for n in refused["notes"]), refused
    state = serve(env, ops, case.request(case.listing, x))["state"]
    assert state["status"] == Status.FINALIZED and bytes(state["outputHash"]) == cvm.output_hash(model.run(x, backend=BACKEND))


def test_a_referee_commitment_is_replaced_only_after_the_delay(tmp_path):
    """The replace path: only the listing's publisher proposes a new commitment; it comes into force
    REFEREE_DELAY later (applyReferee, by anyone); operators refuse the listing while a wrong one is
    pending or in force, and serve it again once the right one is."""
    case = listed(tmp_path, precompile=False)
    env, model, reg, author = case.env, case.env.model, case.env.registry, case.author
    right = mc.commit(model).as_tuple()
    garbage = (b"\x02" * 32, right[1], right[2], right[3])
    with reverts("NoRefereeCommitment"):
        env.send(author, reg.functions.proposeReferee(case.listing, garbage, 1))
    mc.publish(env.w3, reg, author, model, listing=case.listing)
    with reverts("RefereeAlreadyCommitted"):
        env.send(author, reg.functions.commitReferee(case.listing, garbage, 1))
    with reverts("NotAuthor"):
        env.send(case.squatter, reg.functions.proposeReferee(case.listing, garbage, 1))
    env.send(author, reg.functions.proposeReferee(case.listing, garbage, 10**9))
    with pytest.raises(mc.RefereeMismatch, match="is proposed to replace"):  # pending: requests taken now could be judged by it
        mc.require_served(env.w3, reg, model, case.listing)
    with reverts("RefereeTooEarly"):
        env.send(env.player, reg.functions.applyReferee(case.listing))
    env.chain.advance_time(REFEREE_DELAY)
    env.send(env.player, reg.functions.applyReferee(case.listing))
    assert tuple(reg.functions.refereeCommitment(case.listing).call()) == garbage
    with reverts("NoPendingReferee"):
        env.send(env.player, reg.functions.applyReferee(case.listing))
    with pytest.raises(mc.RefereeMismatch, match="is not the model's"):
        mc.require_served(env.w3, reg, model, case.listing)
    mc.publish(env.w3, reg, author, model, listing=case.listing, replace=True)
    env.chain.advance_time(REFEREE_DELAY)
    env.send(env.player, reg.functions.applyReferee(case.listing))
    assert mc.check_published(reg, model, case.listing)
    mc.require_served(env.w3, reg, model, case.listing)


def test_the_dispute_gas_is_stored_with_the_commitment_and_checked(tmp_path):
    case = listed(tmp_path, precompile=False)
    env, model, reg = case.env, case.env.model, case.env.registry
    c = mc.commit(model)
    worst = dispute_cost.dispute_gas(model, c)
    assert worst == dispute_cost.worst_case(model).gas > 500_000
    env.send(case.squatter, reg.functions.commitReferee(model.hash, c.as_tuple(), worst - 1))  # the squatter's: too low
    with pytest.raises(mc.RefereeMismatch, match="below the model's worst case"):
        mc.require_served(env.w3, reg, model)
    r = mc.publish(env.w3, reg, case.author, model, listing=case.listing)
    ev = reg.events.DisputeGasSet().process_receipt(r, errors=DISCARD)[0]["args"]
    assert (ev["id"], ev["disputeGas"]) == (case.listing, worst) and reg.functions.disputeGas(case.listing).call() == worst
    mc.require_served(env.w3, reg, model, case.listing)
    env.send(case.author, reg.functions.proposeReferee(case.listing, c.as_tuple(), worst // 2))  # bonds halved later
    with pytest.raises(mc.RefereeMismatch, match="is proposed to replace"):
        mc.require_served(env.w3, reg, model, case.listing)
