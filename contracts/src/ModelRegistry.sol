// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

/// @title ModelRegistry
/// @notice Authors register CVM models by their hash (keccak256 of the model's consensus part)
/// together with where to fetch the file, the shape of one input and one output sample, the
/// model's static gas cost and the hash of its calibration data. An entry belongs to its author:
/// only the author may change its URI or deprecate it. The hash, specs and gas never change.
///
/// Registration is commit-reveal, so that whoever sees a model hash in the mempool cannot register
/// it first with false metadata: the author first commits keccak256(abi.encode(modelHash, author,
/// salt)) with `commitRegistration`, then, in a later block, calls `register` with the salt. A
/// front-runner's commitment is younger than the author's pending `register` transaction, so it
/// cannot be revealed before it. (Publish the model file only after the commitment is mined.)
contract ModelRegistry {
    /// Shape of one sample (the batch dimension left out) and the value width in bits (1..32).
    /// Values are stored on the wire as int8, int16 or int32 little-endian, chosen by `bits`.
    struct TensorSpec {
        uint32[] shape;
        uint8 bits;
    }

    struct Model {
        address author;
        bool deprecated;
        uint64 gas; // static CVM cost of one sample
        uint32 inputBytes; // wire size of one input sample
        uint32 outputBytes; // wire size of one output sample
        bytes32 calibrationHash;
        string uri;
        TensorSpec input;
        TensorSpec output;
    }

    /// What the Solidity referee needs of a model (cvm/chain/model_commitment.py): the Merkle root
    /// over its nodes' specs at their trace leaves, the trace's leaf count and output leaf, and the
    /// msgpack bytes in front of one output sample in its output commitment (spec section 10).
    /// Computed from the model, set once by its author; operators check it before serving.
    struct RefereeCommitment {
        bytes32 root;
        uint32 leafCount;
        uint32 outputLeaf;
        bytes outputPrefix;
    }

    uint8 public constant MAX_BITS = 32; // cvm.limits.MAX_BITS
    uint256 public constant MAX_RANK = 6; // cvm.limits.MAX_RANK (tests/chain/test_solidity_constants.py)
    uint256 public constant MAX_SAMPLE_BYTES = 1 << 26; // MAX_TENSOR_ELEMENTS (2^24) int32 elements
    uint256 public constant MAX_INPUTS = 16; // inputs of one model (registerInputs)

    mapping(bytes32 => Model) private _models;
    mapping(bytes32 => RefereeCommitment) private _referee;
    mapping(bytes32 => TensorSpec[]) private _extraInputs;
    /// registration commitment -> block number it was made in
    mapping(bytes32 => uint256) public registrationCommitments;

    event ModelRegistered(bytes32 indexed modelHash, address indexed author, string uri, uint64 gas);
    event ModelURIUpdated(bytes32 indexed modelHash, string uri);
    event ModelDeprecated(bytes32 indexed modelHash);
    event RegistrationCommitted(bytes32 indexed commitment, address indexed author);
    event RefereeCommitted(bytes32 indexed modelHash, bytes32 root);

    error ZeroModelHash();
    error ZeroGas();
    error AlreadyRegistered(bytes32 modelHash);
    error UnknownModel(bytes32 modelHash);
    error NotAuthor(bytes32 modelHash, address caller);
    error AlreadyDeprecated(bytes32 modelHash);
    error InvalidTensorSpec();
    error RegistrationNotCommitted(bytes32 commitment);
    error RegistrationTooEarly(bytes32 commitment);
    error AlreadyCommitted(bytes32 commitment);
    error RefereeAlreadyCommitted(bytes32 modelHash);
    error BadRefereeCommitment(bytes32 modelHash);

    modifier onlyAuthor(bytes32 modelHash) {
        address author = _models[modelHash].author;
        if (author == address(0)) revert UnknownModel(modelHash);
        if (author != msg.sender) revert NotAuthor(modelHash, msg.sender);
        _;
    }

    /// keccak256(abi.encode(modelHash, author, salt)): what `commitRegistration` takes.
    function registrationCommitment(bytes32 modelHash, address author, bytes32 salt) public pure returns (bytes32) {
        return keccak256(abi.encode(modelHash, author, salt));
    }

    /// First step of registering: commits to (modelHash, msg.sender, salt) without showing the hash.
    function commitRegistration(bytes32 commitment) external {
        if (registrationCommitments[commitment] != 0) revert AlreadyCommitted(commitment);
        registrationCommitments[commitment] = block.number;
        emit RegistrationCommitted(commitment, msg.sender);
    }

    /// Second step, in a block after the commitment: registers the model to msg.sender.
    function register(
        bytes32 modelHash,
        string calldata uri,
        TensorSpec calldata input,
        TensorSpec calldata output,
        uint64 gas,
        bytes32 calibrationHash,
        bytes32 salt
    ) external {
        Model storage m = _claim(modelHash, gas, salt);
        m.inputBytes = sampleBytes(input);
        m.input = input;
        _describe(m, modelHash, uri, output, calibrationHash);
    }

    /// `register` for a model with several inputs (a sentence encoder's token ids and attention mask),
    /// in model input order: the first is `Model.input`, the others `extraInputs(modelHash)`, and one
    /// sample on the wire is their sample bytes summed (spec section 11: inputs concatenated in order).
    function registerInputs(
        bytes32 modelHash,
        string calldata uri,
        TensorSpec[] calldata inputs,
        TensorSpec calldata output,
        uint64 gas,
        bytes32 calibrationHash,
        bytes32 salt
    ) external {
        if (inputs.length == 0 || inputs.length > MAX_INPUTS) revert InvalidTensorSpec();
        Model storage m = _claim(modelHash, gas, salt);
        uint256 size = sampleBytes(inputs[0]);
        m.input = inputs[0];
        for (uint256 i = 1; i < inputs.length; i++) {
            size += sampleBytes(inputs[i]);
            _extraInputs[modelHash].push(inputs[i]);
        }
        if (size > MAX_SAMPLE_BYTES) revert InvalidTensorSpec();
        m.inputBytes = uint32(size);
        _describe(m, modelHash, uri, output, calibrationHash);
    }

    /// The checks both registrations share; consumes the author's commitment.
    function _claim(bytes32 modelHash, uint64 gas, bytes32 salt) private returns (Model storage m) {
        if (modelHash == bytes32(0)) revert ZeroModelHash();
        if (gas == 0) revert ZeroGas();
        if (_models[modelHash].author != address(0)) revert AlreadyRegistered(modelHash);
        bytes32 commitment = registrationCommitment(modelHash, msg.sender, salt);
        uint256 committedAt = registrationCommitments[commitment];
        if (committedAt == 0) revert RegistrationNotCommitted(commitment);
        if (committedAt >= block.number) revert RegistrationTooEarly(commitment);
        delete registrationCommitments[commitment];
        m = _models[modelHash];
        m.author = msg.sender;
        m.gas = gas;
    }

    function _describe(
        Model storage m,
        bytes32 modelHash,
        string calldata uri,
        TensorSpec calldata output,
        bytes32 calibrationHash
    ) private {
        m.outputBytes = sampleBytes(output);
        m.calibrationHash = calibrationHash;
        m.uri = uri;
        m.output = output;
        emit ModelRegistered(modelHash, msg.sender, uri, m.gas);
    }

    /// The inputs after the first of a model registered with `registerInputs` (empty otherwise).
    function extraInputs(bytes32 modelHash) external view returns (TensorSpec[] memory) {
        return _extraInputs[modelHash];
    }

    function updateURI(bytes32 modelHash, string calldata uri) external onlyAuthor(modelHash) {
        _models[modelHash].uri = uri;
        emit ModelURIUpdated(modelHash, uri);
    }

    function deprecate(bytes32 modelHash) external onlyAuthor(modelHash) {
        Model storage m = _models[modelHash];
        if (m.deprecated) revert AlreadyDeprecated(modelHash);
        m.deprecated = true;
        emit ModelDeprecated(modelHash);
    }

    /// The author's one-time referee commitment of a registered model.
    function commitReferee(bytes32 modelHash, RefereeCommitment calldata c) external onlyAuthor(modelHash) {
        if (_referee[modelHash].root != bytes32(0)) revert RefereeAlreadyCommitted(modelHash);
        if (c.root == bytes32(0) || c.outputLeaf >= c.leafCount) revert BadRefereeCommitment(modelHash);
        _referee[modelHash] = c;
        emit RefereeCommitted(modelHash, c.root);
    }

    function refereeCommitment(bytes32 modelHash) external view returns (RefereeCommitment memory) {
        return _referee[modelHash];
    }

    function getModel(bytes32 modelHash) external view returns (Model memory) {
        Model storage m = _models[modelHash];
        if (m.author == address(0)) revert UnknownModel(modelHash);
        return m;
    }

    /// What the oracle needs of a model to take a request, in two storage reads: whether it is active
    /// (registered, not deprecated), its CVM gas and its input and output sizes.
    function terms(bytes32 modelHash)
        external
        view
        returns (bool active, uint64 gas, uint32 inputBytes_, uint32 outputBytes_)
    {
        Model storage m = _models[modelHash];
        return (m.author != address(0) && !m.deprecated, m.gas, m.inputBytes, m.outputBytes);
    }

    /// True when the model is registered and not deprecated: new requests may use it.
    function isActive(bytes32 modelHash) external view returns (bool) {
        Model storage m = _models[modelHash];
        return m.author != address(0) && !m.deprecated;
    }

    function inputBytes(bytes32 modelHash) external view returns (uint256) {
        return _models[modelHash].inputBytes;
    }

    function outputBytes(bytes32 modelHash) external view returns (uint256) {
        return _models[modelHash].outputBytes;
    }

    /// Bytes of one element on the wire: the storage type that `bits` selects.
    function elementBytes(uint8 bits) public pure returns (uint32) {
        if (bits == 0 || bits > MAX_BITS) revert InvalidTensorSpec();
        if (bits <= 8) return 1;
        if (bits <= 16) return 2;
        return 4;
    }

    /// Wire size of one sample of `spec`; reverts on an empty shape, a zero dimension or a
    /// sample larger than MAX_SAMPLE_BYTES.
    function sampleBytes(TensorSpec calldata spec) public pure returns (uint32) {
        uint256 rank = spec.shape.length;
        if (rank == 0 || rank > MAX_RANK) revert InvalidTensorSpec();
        uint256 size = elementBytes(spec.bits);
        for (uint256 i = 0; i < rank; i++) {
            uint256 dim = spec.shape[i];
            if (dim == 0) revert InvalidTensorSpec();
            size *= dim;
            if (size > MAX_SAMPLE_BYTES) revert InvalidTensorSpec();
        }
        return uint32(size);
    }
}
