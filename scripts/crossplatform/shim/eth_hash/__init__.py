"""Minimal stand-in for the eth-hash package (not packaged by Debian), used only by
scripts/crossplatform/run.sh inside a foreign Debian userland. It offers exactly what cvm uses:
`from eth_hash.auto import keccak`; keccak(data) -> 32-byte keccak256 digest (pycryptodome)."""
