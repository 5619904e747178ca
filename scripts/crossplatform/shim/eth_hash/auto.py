"""eth_hash.auto.keccak on top of Debian's python3-pycryptodome, which installs the
pycryptodomex layout (Cryptodome.Hash.keccak); the upstream layout (Crypto.Hash.keccak) also works."""
try:
    from Cryptodome.Hash import keccak as _keccak
except ImportError:
    from Crypto.Hash import keccak as _keccak


def keccak(data) -> bytes:
    return _keccak.new(data=bytes(data), digest_bits=256).digest()
