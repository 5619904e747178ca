// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {ModelRegistry} from "../src/ModelRegistry.sol";

/// Commits and registers a model in one transaction: what a front-runner who saw the hash in the
/// mempool would need. The registry refuses a commitment of the same block.
contract Squatter {
    function squat(ModelRegistry registry, bytes32 modelHash, ModelRegistry.TensorSpec calldata spec, bytes32 salt)
        external
    {
        registry.commitRegistration(registry.registrationCommitment(modelHash, address(this), salt));
        registry.register(modelHash, "evil://", spec, spec, 1, bytes32(0), salt);
    }
}
