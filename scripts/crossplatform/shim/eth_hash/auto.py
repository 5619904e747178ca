"""eth_hash.auto.keccak on top of Debian's python3-pycryptodome (Crypto.Hash.keccak)."""
from Crypto.Hash import keccak as _keccak


def keccak(data) -> bytes:
    return _keccak.new(data=bytes(data), digest_bits=256).digest()
