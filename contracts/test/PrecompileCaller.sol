// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {ICVM} from "../src/ICVM.sol";

/// Calls the CVM precompile for the precompile tests: `callRaw` forwards a chosen amount of gas and
/// records what came back (so a failed inner call is seen from a caller that goes on), `infer`
/// goes through the ICVM library.
contract PrecompileCaller {
    uint256 public calls;
    bool public lastOk;
    bytes public lastOutput;

    function callRaw(bytes calldata data, uint256 gas) external returns (bool ok) {
        bytes memory out;
        (ok, out) = ICVM.PRECOMPILE.staticcall{gas: gas}(data);
        calls += 1;
        lastOk = ok;
        lastOutput = out;
    }

    function infer(bytes32 modelHash, bytes calldata input) external view returns (bytes memory) {
        return ICVM.infer(modelHash, input);
    }
}
