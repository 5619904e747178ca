"""ModelStore: content addressing, verification on read, and rejection of mislabelled files."""

import shutil

import pytest
from chainkit import ROOT, tiny_model

import cvm
from cvm.chain.store import ModelStore, StoreError

pytestmark = pytest.mark.chain
TINY_CNN = ROOT / "fixtures/cvm/tiny_cnn.cvm"


def test_put_get_round_trip(tmp_path):
    store = ModelStore(tmp_path)
    h = store.put(TINY_CNN)
    assert h == cvm.load(TINY_CNN).hash
    assert (tmp_path / f"{h.hex()}.cvm").read_bytes() == TINY_CNN.read_bytes()
    assert store.put(TINY_CNN.read_bytes()) == h  # idempotent, from bytes too
    model = tiny_model()
    h2 = store.put(model)
    assert store.hashes() == sorted([h, h2])
    fresh = ModelStore(tmp_path)  # no cache: reads and verifies the file
    assert fresh.get(h).hash == h and fresh.get("0x" + h2.hex()).hash == h2
    assert h in fresh and b"\x00" * 32 not in fresh


def test_rejects_a_file_whose_hash_is_not_its_name(tmp_path):
    store = ModelStore(tmp_path)
    h = store.put(TINY_CNN)
    other = tiny_model().hash
    shutil.copy(store.path(h), store.path(other))
    with pytest.raises(StoreError, match="not its name"):
        ModelStore(tmp_path).get(other)


def test_rejects_garbage_and_unknown(tmp_path):
    store = ModelStore(tmp_path)
    bogus = b"\x42" * 32
    store.path(bogus).write_bytes(b"not a model")
    with pytest.raises(StoreError, match="not a valid model"):
        store.get(bogus)
    with pytest.raises(StoreError, match="no model"):
        store.get(b"\x43" * 32)
    with pytest.raises(StoreError):
        store.get("0x1234")
    with pytest.raises(cvm.CVMError):
        store.put(b"garbage")
    assert store.hashes() == [bogus]  # put wrote nothing
