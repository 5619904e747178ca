// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

/// @title ModelRegistry
/// @notice Lists CVM models by their hash (keccak256 of the model's consensus part) together with
/// where to fetch the file, the shape of one input and one output sample, the model's static gas
/// cost and the hash of its calibration data. An entry (a listing) belongs to its publisher: only
/// the publisher may change its URI, deprecate it or commit its referee commitment. The specs and
/// gas never change. Requests, oracles and disputes name a listing by its id.
///
/// Two kinds of listing of one file: the author's, id = modelHash, made by the commit-reveal below;
/// and anyone's own, id = listingId(modelHash, publisher) (`registerListing`, no commit needed: the
/// id binds the publisher's address). Whoever registers a public file first holds only the listing
/// whose id is its hash: the file's real users publish and use their own listing, with its own
/// specs, gas, URI, deprecation and referee commitment. `modelHashOf(id)` is the file of either.
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
        uint64 disputeGas; // the honest side's worst-case dispute gas, set with the referee commitment
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
    /// A listing's referee commitment and dispute gas, once set, change only this long after the
    /// publisher proposes the change (`proposeReferee`): longer than any request taken under the old
    /// one lasts, its disputes included (an oracle's commit + reveal + challenge windows + its game's
    /// maxDuration), so operators see a wrong replacement coming and stop taking its requests.
    uint256 public constant REFEREE_DELAY = 3 days;

    /// A proposed replacement of a listing's referee commitment and dispute gas.
    struct PendingReferee {
        RefereeCommitment c;
        uint64 disputeGas;
        uint64 effectiveAt; // 0: none pending
    }

    mapping(bytes32 => Model) private _models; // by listing id
    mapping(bytes32 => bytes32) private _fileOf; // listing id -> model hash (0 for the author's: id = hash)
    mapping(bytes32 => RefereeCommitment) private _referee;
    mapping(bytes32 => PendingReferee) private _pendingReferee;
    mapping(bytes32 => TensorSpec[]) private _extraInputs;
    /// registration commitment -> block number it was made in
    mapping(bytes32 => uint256) public registrationCommitments;

    event ModelRegistered(bytes32 indexed modelHash, address indexed author, string uri, uint64 gas);
    event ModelURIUpdated(bytes32 indexed modelHash, string uri);
    event ModelDeprecated(bytes32 indexed modelHash);
    event RegistrationCommitted(bytes32 indexed commitment, address indexed author);
    event RefereeCommitted(bytes32 indexed modelHash, bytes32 root);
    event ListingRegistered(bytes32 indexed id, bytes32 indexed modelHash, address indexed publisher);
    event DisputeGasSet(bytes32 indexed id, uint64 disputeGas);
    event RefereeProposed(bytes32 indexed id, bytes32 root, uint64 disputeGas, uint64 effectiveAt);

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
    error NoRefereeCommitment(bytes32 id);
    error NoPendingReferee(bytes32 id);
    error RefereeTooEarly(bytes32 id, uint64 effectiveAt);

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
        Model storage m = _claim(modelHash, gas, salt);
        _setInputs(m, modelHash, inputs);
        _describe(m, modelHash, uri, output, calibrationHash);
    }

    /// A listing of the file `modelHash` by msg.sender, id = listingId(modelHash, msg.sender), one
    /// per publisher and file, in one transaction (nobody else can take its id). `inputs` in model
    /// input order, as `registerInputs`. An author registration (`register`) under this id is replaced:
    /// no file hashes to a listing id (a keccak256 preimage), so it named no model and nobody can use
    /// it to hold a publisher's listing id.
    function registerListing(
        bytes32 modelHash,
        string calldata uri,
        TensorSpec[] calldata inputs,
        TensorSpec calldata output,
        uint64 gas,
        bytes32 calibrationHash
    ) external returns (bytes32 id) {
        if (modelHash == bytes32(0)) revert ZeroModelHash();
        if (gas == 0) revert ZeroGas();
        id = listingId(modelHash, msg.sender);
        if (_fileOf[id] != bytes32(0)) revert AlreadyRegistered(id);
        if (_models[id].author != address(0)) _clear(id);
        _fileOf[id] = modelHash;
        Model storage m = _models[id];
        (m.author, m.gas) = (msg.sender, gas);
        _setInputs(m, id, inputs);
        _describe(m, id, uri, output, calibrationHash);
        emit ListingRegistered(id, modelHash, msg.sender);
    }

    /// The id of `publisher`'s own listing of the file `modelHash` (`registerListing`).
    function listingId(bytes32 modelHash, address publisher) public pure returns (bytes32) {
        return keccak256(abi.encode(modelHash, publisher));
    }

    /// The model file a listing lists: its own id for an author's registration (and for an id nobody
    /// listed), the file's hash for a publisher's listing. Nodes load the model by it; the trace
    /// precompile takes it.
    function modelHashOf(bytes32 id) external view returns (bytes32) {
        bytes32 h = _fileOf[id];
        return h == bytes32(0) ? id : h;
    }

    function _setInputs(Model storage m, bytes32 id, TensorSpec[] calldata inputs) private {
        if (inputs.length == 0 || inputs.length > MAX_INPUTS) revert InvalidTensorSpec();
        uint256 size = sampleBytes(inputs[0]);
        m.input = inputs[0];
        for (uint256 i = 1; i < inputs.length; i++) {
            size += sampleBytes(inputs[i]);
            _extraInputs[id].push(inputs[i]);
        }
        if (size > MAX_SAMPLE_BYTES) revert InvalidTensorSpec();
        m.inputBytes = uint32(size);
    }

    function _clear(bytes32 id) private {
        delete _models[id];
        delete _extraInputs[id];
        delete _referee[id];
        delete _pendingReferee[id];
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

    /// The publisher's first referee commitment of a listing, in force at once, with the honest side's
    /// worst-case dispute gas for the model (cvm/chain/dispute_cost.py), which prices the bonds.
    /// Later changes go through `proposeReferee`.
    function commitReferee(bytes32 id, RefereeCommitment calldata c, uint64 disputeGas_) external onlyAuthor(id) {
        if (_referee[id].root != bytes32(0)) revert RefereeAlreadyCommitted(id);
        _checkReferee(id, c);
        _setReferee(id, c, disputeGas_);
    }

    /// The publisher replaces its listing's referee commitment and dispute gas: in force REFEREE_DELAY
    /// from now, by `applyReferee`. A later proposal replaces this one and restarts the delay.
    function proposeReferee(bytes32 id, RefereeCommitment calldata c, uint64 disputeGas_) external onlyAuthor(id) {
        if (_referee[id].root == bytes32(0)) revert NoRefereeCommitment(id);
        _checkReferee(id, c);
        PendingReferee storage p = _pendingReferee[id];
        (p.c, p.disputeGas, p.effectiveAt) = (c, disputeGas_, uint64(block.timestamp + REFEREE_DELAY));
        emit RefereeProposed(id, c.root, disputeGas_, p.effectiveAt);
    }

    /// Anyone, once the delay is over: puts the proposed commitment and dispute gas in force.
    function applyReferee(bytes32 id) external {
        PendingReferee storage p = _pendingReferee[id];
        if (p.effectiveAt == 0) revert NoPendingReferee(id);
        if (block.timestamp < p.effectiveAt) revert RefereeTooEarly(id, p.effectiveAt);
        _setReferee(id, p.c, p.disputeGas);
        delete _pendingReferee[id];
    }

    function _checkReferee(bytes32 id, RefereeCommitment calldata c) private pure {
        if (c.root == bytes32(0) || c.outputLeaf >= c.leafCount) revert BadRefereeCommitment(id);
    }

    function _setReferee(bytes32 id, RefereeCommitment memory c, uint64 disputeGas_) private {
        _referee[id] = c;
        _models[id].disputeGas = disputeGas_; // beside gas and sizes: `terms` reads it in the same slot
        emit RefereeCommitted(id, c.root);
        emit DisputeGasSet(id, disputeGas_);
    }

    /// The listing's referee commitment in force (root 0: none).
    function refereeCommitment(bytes32 id) external view returns (RefereeCommitment memory) {
        return _referee[id];
    }

    /// The honest side's worst-case gas in a dispute about the listing's model, set with its referee
    /// commitment (0 when none).
    function disputeGas(bytes32 id) external view returns (uint64) {
        return _models[id].disputeGas;
    }

    /// The proposed replacement of the listing's referee commitment (effectiveAt 0: none).
    function pendingReferee(bytes32 id) external view returns (PendingReferee memory) {
        return _pendingReferee[id];
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
        returns (bool active, uint64 gas, uint32 inputBytes_, uint32 outputBytes_, uint64 disputeGas_)
    {
        Model storage m = _models[modelHash];
        return (m.author != address(0) && !m.deprecated, m.gas, m.inputBytes, m.outputBytes, m.disputeGas);
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
