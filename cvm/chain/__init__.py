"""CVM on chain: contracts (committed artifacts), the embedded chain with the CVM precompile,
the model store, the node operator and the demo. Needs the `chain` extra (web3, eth-tester,
py-evm); the core `cvm` package never imports this one.

    store.py       ModelStore: content-addressed .cvm files, verified on read
    precompile.py  the CVM precompile (address, gas) for py-evm
    embedded.py    EmbeddedChain: py-evm Prague + the precompile, behind web3
    contracts.py   artifacts, deployment, signed transactions, custom-error decoding
    node.py        the oracle node operator (`cvm node`), its state in SQLite
    states.py      the request states of node and contract, their moves, and how they map
    demo.py        `cvm demo`
    cli.py         registers `demo` and `node` into the `cvm` command
"""
