// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {Multicall} from "@openzeppelin/contracts/utils/Multicall.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";
import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {IShieldAdapter} from "./interfaces/IShieldAdapter.sol";
import {IUniswapV2Router} from "./interfaces/IUniswapV2Router.sol";
import {ShieldPayload} from "./libraries/ShieldPayload.sol";

/// @title FeeVault
/// @notice Holds fees for beneficiaries identified by a commitment (an owner key or a social handle)
/// until the owner claims them through a relayer, consolidates them into the settlement asset or
/// shields them. Normative description: docs/protocol.md sections 2-5.
contract FeeVault is Ownable, EIP712, Multicall, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    // ---------------------------------------------------------------- types

    struct Claim {
        bytes32 beneficiaryId;
        address asset;
        uint256 amount;
        address adapter;
        bytes32 dataHash;
        address relayer;
        uint256 relayerFee;
        uint256 nonce;
        uint256 deadline;
    }

    struct Account {
        uint8 kind;
        address owner;
        address fallbackRecipient;
        uint256 fallbackDelay;
        uint256 lastActivity;
        address pendingOwner;
        uint256 pendingReadyAt;
        uint256 sweepClosedUntil;
    }

    /// @dev The variable part of a template; the rest of the payload is fixed by the canonical form.
    /// Six slots instead of the ten a raw 320-byte payload would take.
    struct Template {
        bytes32 npk;
        uint120 value;
        bool used;
        bytes32[3] encryptedBundle;
        bytes32 shieldKey;
    }

    // ------------------------------------------------------------ constants

    uint256 public constant FULL = type(uint256).max;
    uint256 public constant QUOTED = 1 << 255;
    uint256 public constant MAX_TEMPLATES = 32;
    uint256 public constant MAX_CONTRACT_SIGNATURE_LENGTH = 2048;

    uint8 internal constant KIND_OWNER = 1;
    uint8 internal constant KIND_HANDLE = 2;

    bytes32 public constant CLAIM_TYPEHASH = keccak256(
        "Claim(bytes32 beneficiaryId,address asset,uint256 amount,address adapter,bytes32 dataHash,address relayer,uint256 relayerFee,uint256 nonce,uint256 deadline)"
    );
    bytes32 public constant CONSOLIDATE_TYPEHASH = keccak256(
        "Consolidate(bytes32 id,address assetIn,uint256 amountIn,uint256 minOut,uint256 nonce,uint256 deadline)"
    );
    bytes32 public constant REGISTER_SHIELD_TEMPLATES_TYPEHASH =
        keccak256("RegisterShieldTemplates(bytes32 id,bytes32 templatesHash,uint256 nonce,uint256 deadline)");
    bytes32 public constant ROTATE_OWNER_TYPEHASH =
        keccak256("RotateOwner(bytes32 id,address newOwner,uint256 nonce,uint256 deadline)");
    bytes32 public constant PING_TYPEHASH = keccak256("Ping(bytes32 id,uint256 nonce,uint256 deadline)");
    bytes32 public constant CANCEL_BIND_TYPEHASH =
        keccak256("CancelBind(bytes32 id,uint256 bindNonce,uint256 deadline)");
    bytes32 public constant BIND_OWNER_TYPEHASH =
        keccak256("BindOwner(bytes32 id,address newOwner,uint256 bindNonce,uint256 deadline)");

    // ---------------------------------------------------------------- state

    address public immutable settlementAsset;

    address public shieldAdapter;
    address public swapRouter;
    address public launcher;
    uint256 public attestorThreshold;
    uint256 public bindDelay;
    mapping(address account => bool) public isAttestor;

    mapping(bytes32 id => Account) private _accounts;
    mapping(bytes32 id => uint256) public nonces;
    mapping(bytes32 id => uint256) public bindNonces;
    mapping(bytes32 id => mapping(address asset => uint256)) public balanceOf;
    mapping(bytes32 id => mapping(address asset => uint256)) public totalDeposited;

    mapping(bytes32 id => mapping(uint256 index => Template)) private _templates;
    /// @dev Size of the current template set (used ones included) and how many of it are unused.
    mapping(bytes32 id => uint256) private _templateSetSize;
    mapping(bytes32 id => uint256) private _templatesUnused;

    // --------------------------------------------------------------- events

    event Deposited(bytes32 indexed id, address indexed asset, address indexed from, uint256 amount);
    event Registered(
        bytes32 indexed id,
        uint8 kind,
        address owner,
        bytes32 commitment,
        address fallbackRecipient,
        uint256 fallbackDelay
    );
    event Claimed(
        bytes32 indexed id,
        address indexed asset,
        address indexed adapter,
        address relayer,
        uint256 amount,
        uint256 relayerFee,
        uint256 nonce
    );
    event Consolidated(bytes32 indexed id, address indexed assetIn, uint256 amountIn, uint256 amountOut, uint256 nonce);
    event ShieldTemplatesRegistered(bytes32 indexed id, uint256 count, bytes32 templatesHash, uint256 nonce);
    event ShieldTemplatesCleared(bytes32 indexed id, uint256 count);
    event ShieldedFromTemplate(bytes32 indexed id, uint256 indexed index, uint256 amount);
    event OwnerRotated(bytes32 indexed id, address indexed previousOwner, address indexed newOwner, uint256 nonce);
    event Pinged(bytes32 indexed id, uint256 nonce);
    event BindProposed(bytes32 indexed id, address indexed newOwner, uint256 readyAt, uint256 bindNonce);
    event BindFinalized(bytes32 indexed id, address indexed previousOwner, address indexed newOwner);
    event BindCancelled(bytes32 indexed id, address indexed by, bool vetoed);
    event SweptToFallback(bytes32 indexed id, address indexed asset, address indexed recipient, uint256 amount);
    event TokenLaunched(address indexed token, bytes32 indexed beneficiaryId, bytes beneficiaryHint);

    event AttestorSet(address indexed attestor, bool enabled);
    event AttestorThresholdSet(uint256 threshold);
    event BindDelaySet(uint256 bindDelay);
    event ShieldAdapterSet(address indexed adapter);
    event SwapRouterSet(address indexed router);
    event LauncherSet(address indexed launcher);

    // --------------------------------------------------------------- errors

    error NotRegistered(bytes32 id);
    error AlreadyRegistered(bytes32 id);
    error InvalidOwner();
    error InvalidFallback();
    error OwnerNotSet(bytes32 id);
    error InvalidSignature();
    error InvalidNonce(uint256 expected, uint256 provided);
    error DeadlineExpired(uint256 deadline);
    error RelayerMismatch(address relayer, address sender);
    error DataHashMismatch();
    error ZeroAmount();
    error FeeAboveAmount(uint256 amount, uint256 relayerFee);
    error InsufficientBalance(uint256 balance, uint256 required);
    error AdapterNotAllowed(address adapter, address asset);
    error InvalidAdapterData();
    error InvalidShieldPayload();
    error InvalidTemplates();
    error TemplateNotFound(uint256 index);
    error TemplateAlreadyUsed(uint256 index);
    error ShieldAdapterNotSet();
    error SwapRouterNotSet();
    error InvalidAssetIn(address asset);
    error ZeroMinOut();
    error InsufficientOutput(uint256 amountOut, uint256 minOut);
    error NotHandleAccount(bytes32 id);
    error BindPending(bytes32 id);
    error NoPendingBind(bytes32 id);
    error BindNotReady(uint256 readyAt);
    error ThresholdNotSet();
    error InsufficientAttestations(uint256 provided, uint256 threshold);
    error UnsortedSigners();
    error NotAttestor(address account);
    error NoFallback(bytes32 id);
    error SweepClosed(uint256 until);
    error FallbackNotDue(uint256 dueAt);
    error NothingToSweep();
    error NotLauncher(address account);
    error ZeroAddress();

    /// @dev Raised by the reference shield adapter and bubbled up through claims and template shields;
    /// declared here so that the vault's ABI alone decodes every revert a vault call can produce.
    error SanctionedOrigin(address origin);
    error NonCanonicalPayload();
    error NothingToShield();
    error ValueTooLarge(uint256 value);

    // ---------------------------------------------------------- constructor

    constructor(address settlementAsset_, address admin) Ownable(admin) EIP712("FeeVault", "1") {
        if (settlementAsset_ == address(0)) revert ZeroAddress();
        settlementAsset = settlementAsset_;
    }

    // ---------------------------------------------------------------- admin

    function setAttestor(address attestor, bool enabled) external onlyOwner {
        if (attestor == address(0)) revert ZeroAddress();
        isAttestor[attestor] = enabled;
        emit AttestorSet(attestor, enabled);
    }

    function setAttestorThreshold(uint256 threshold) external onlyOwner {
        attestorThreshold = threshold;
        emit AttestorThresholdSet(threshold);
    }

    function setBindDelay(uint256 delay) external onlyOwner {
        bindDelay = delay;
        emit BindDelaySet(delay);
    }

    /// @dev Zero disables shield claims and template shields.
    function setShieldAdapter(address adapter) external onlyOwner {
        shieldAdapter = adapter;
        emit ShieldAdapterSet(adapter);
    }

    /// @dev Zero disables consolidation.
    function setSwapRouter(address router) external onlyOwner {
        swapRouter = router;
        emit SwapRouterSet(router);
    }

    function setLauncher(address launcher_) external onlyOwner {
        launcher = launcher_;
        emit LauncherSet(launcher_);
    }

    // ---------------------------------------------------------------- views

    function accountOf(bytes32 id)
        external
        view
        returns (
            uint8 kind,
            address owner,
            address fallbackRecipient,
            uint256 fallbackDelay,
            uint256 lastActivity,
            address pendingOwner,
            uint256 pendingReadyAt,
            uint256 sweepClosedUntil
        )
    {
        Account storage a = _accounts[id];
        return (
            a.kind,
            a.owner,
            a.fallbackRecipient,
            a.fallbackDelay,
            a.lastActivity,
            a.pendingOwner,
            a.pendingReadyAt,
            a.sweepClosedUntil
        );
    }

    function shieldTemplateCount(bytes32 id) external view returns (uint256) {
        return _templatesUnused[id];
    }

    /// @notice A template of the current set rebuilt as its canonical payload, and whether it was used.
    function shieldTemplate(bytes32 id, uint256 index) external view returns (bytes memory payload, bool used) {
        if (index >= _templateSetSize[id]) revert TemplateNotFound(index);
        Template storage t = _templates[id][index];
        return (ShieldPayload.encode(_noteOf(id, t), settlementAsset), t.used);
    }

    function computeId(uint8 kind, bytes32 commitment, address fallbackRecipient, uint256 fallbackDelay)
        public
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(kind, commitment, fallbackRecipient, fallbackDelay));
    }

    // ------------------------------------------------------------- deposits

    /// @notice Credits what actually arrived, so fee-on-transfer tokens cannot inflate a balance.
    /// Allowed before the account is registered: ids are deterministic.
    function deposit(bytes32 id, address asset, uint256 amount) external nonReentrant {
        if (amount == 0) revert ZeroAmount();
        if (asset == address(0)) revert ZeroAddress();
        IERC20 token = IERC20(asset);
        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(msg.sender, address(this), amount);
        uint256 received = token.balanceOf(address(this)) - before;
        if (received == 0) revert ZeroAmount();
        balanceOf[id][asset] += received;
        totalDeposited[id][asset] += received;
        emit Deposited(id, asset, msg.sender, received);
    }

    // --------------------------------------------------------- registration

    function registerOwner(address owner, bytes32 salt, address fallbackRecipient, uint256 fallbackDelay)
        external
        returns (bytes32 id)
    {
        if (owner == address(0)) revert InvalidOwner();
        bytes32 commitment = keccak256(abi.encode(owner, salt));
        id = _register(KIND_OWNER, owner, commitment, fallbackRecipient, fallbackDelay);
    }

    function registerHandle(bytes32 handleCommitment, address fallbackRecipient, uint256 fallbackDelay)
        external
        returns (bytes32 id)
    {
        id = _register(KIND_HANDLE, address(0), handleCommitment, fallbackRecipient, fallbackDelay);
    }

    function _register(
        uint8 kind,
        address owner,
        bytes32 commitment,
        address fallbackRecipient,
        uint256 fallbackDelay
    ) private returns (bytes32 id) {
        // Both or neither: a recipient without a delay could be swept at once, a delay alone means nothing.
        if ((fallbackRecipient == address(0)) != (fallbackDelay == 0)) revert InvalidFallback();
        id = computeId(kind, commitment, fallbackRecipient, fallbackDelay);
        Account storage a = _accounts[id];
        if (a.kind != 0) revert AlreadyRegistered(id);
        a.kind = kind;
        a.owner = owner;
        a.fallbackRecipient = fallbackRecipient;
        a.fallbackDelay = fallbackDelay;
        a.lastActivity = block.timestamp;
        emit Registered(id, kind, owner, commitment, fallbackRecipient, fallbackDelay);
    }

    // --------------------------------------------------------------- claims

    function claim(Claim calldata c, bytes calldata adapterData, bytes calldata signature) external nonReentrant {
        bytes32 id = c.beneficiaryId;
        _checkDeadline(c.deadline);
        if (c.relayer != address(0) && c.relayer != msg.sender) revert RelayerMismatch(c.relayer, msg.sender);
        Account storage a = _registered(id);
        uint256 nonce = nonces[id];
        if (c.nonce != nonce) revert InvalidNonce(nonce, c.nonce);
        if (keccak256(adapterData) != c.dataHash) revert DataHashMismatch();
        // A static struct encodes as its fields in order, which is exactly the EIP-712 struct encoding.
        _checkOwnerSignature(id, a, keccak256(abi.encode(CLAIM_TYPEHASH, c)), signature);

        uint256 balance = balanceOf[id][c.asset];
        uint256 amount = c.amount == FULL ? balance : c.amount;
        if (amount == 0) revert ZeroAmount();
        if (c.relayerFee > amount) revert FeeAboveAmount(amount, c.relayerFee);
        if (balance < amount) revert InsufficientBalance(balance, amount);

        nonces[id] = nonce + 1;
        balanceOf[id][c.asset] = balance - amount;
        a.lastActivity = block.timestamp;

        if (c.relayerFee != 0) IERC20(c.asset).safeTransfer(msg.sender, c.relayerFee);
        _payOut(id, c.asset, c.adapter, amount - c.relayerFee, adapterData);

        emit Claimed(id, c.asset, c.adapter, msg.sender, amount, c.relayerFee, nonce);
    }

    function _payOut(bytes32 id, address asset, address adapter, uint256 net, bytes calldata adapterData) private {
        if (adapter == address(0)) {
            if (net == 0) {
                // Fee-only claim: nothing else moves, so there is no recipient to name.
                if (adapterData.length != 0) revert InvalidAdapterData();
                return;
            }
            if (adapterData.length != 32) revert InvalidAdapterData();
            uint256 word = uint256(bytes32(adapterData));
            if (word >> 160 != 0 || word == 0) revert InvalidAdapterData();
            IERC20(asset).safeTransfer(address(uint160(word)), net);
            return;
        }
        if (adapter != shieldAdapter || asset != settlementAsset) revert AdapterNotAllowed(adapter, asset);
        if (net == 0) revert ZeroAmount();
        if (!ShieldPayload.isCanonical(adapterData, asset) || ShieldPayload.id(adapterData) != id) {
            revert InvalidShieldPayload();
        }
        IERC20(asset).safeTransfer(adapter, net);
        IShieldAdapter(adapter).shield(adapterData);
    }

    // ---------------------------------------------------------- consolidate

    function consolidate(
        bytes32 id,
        address assetIn,
        uint256 amountIn,
        uint256 minOut,
        uint256 deadline,
        bytes calldata signature
    ) external nonReentrant {
        _checkDeadline(deadline);
        Account storage a = _registered(id);
        if (assetIn == settlementAsset || assetIn == address(0)) revert InvalidAssetIn(assetIn);
        if (amountIn == 0) revert ZeroAmount();
        if (minOut == 0) revert ZeroMinOut();
        uint256 nonce = nonces[id];
        _checkOwnerSignature(
            id, a, keccak256(abi.encode(CONSOLIDATE_TYPEHASH, id, assetIn, amountIn, minOut, nonce, deadline)), signature
        );

        (uint256 amount, uint256 effectiveMinOut) = _resolveSwapAmount(balanceOf[id][assetIn], amountIn, minOut);
        nonces[id] = nonce + 1;
        balanceOf[id][assetIn] -= amount;
        a.lastActivity = block.timestamp;

        uint256 amountOut = _swap(assetIn, amount, effectiveMinOut, deadline);
        balanceOf[id][settlementAsset] += amountOut;
        emit Consolidated(id, assetIn, amount, amountOut, nonce);
    }

    /// @dev FULL swaps the whole balance against an absolute minimum; QUOTED | q swaps the whole balance
    /// and scales the minimum (sized for q) down when less than q is left.
    function _resolveSwapAmount(uint256 balance, uint256 amountIn, uint256 minOut)
        private
        pure
        returns (uint256 amount, uint256 effectiveMinOut)
    {
        if (amountIn == FULL) {
            amount = balance;
            effectiveMinOut = minOut;
        } else if (amountIn & QUOTED != 0) {
            uint256 quoted = amountIn ^ QUOTED;
            amount = balance;
            effectiveMinOut = balance < quoted ? Math.mulDiv(minOut, balance, quoted) : minOut;
        } else {
            if (balance < amountIn) revert InsufficientBalance(balance, amountIn);
            amount = amountIn;
            effectiveMinOut = minOut;
        }
        if (amount == 0) revert ZeroAmount();
    }

    function _swap(address assetIn, uint256 amount, uint256 minOut, uint256 deadline)
        private
        returns (uint256 amountOut)
    {
        address router = swapRouter;
        if (router == address(0)) revert SwapRouterNotSet();
        address[] memory path = new address[](2);
        path[0] = assetIn;
        path[1] = settlementAsset;
        IERC20 out = IERC20(settlementAsset);
        uint256 before = out.balanceOf(address(this));
        IERC20(assetIn).forceApprove(router, amount);
        IUniswapV2Router(router).swapExactTokensForTokens(amount, minOut, path, address(this), deadline);
        IERC20(assetIn).forceApprove(router, 0);
        // Measured rather than trusted from the router's return value.
        amountOut = out.balanceOf(address(this)) - before;
        if (amountOut < minOut) revert InsufficientOutput(amountOut, minOut);
    }

    // ------------------------------------------------------ shield templates

    function registerShieldTemplates(bytes32 id, bytes[] calldata templates, uint256 deadline, bytes calldata signature)
        external
        nonReentrant
    {
        _checkDeadline(deadline);
        Account storage a = _registered(id);
        uint256 count = templates.length;
        if (count == 0 || count > MAX_TEMPLATES) revert InvalidTemplates();
        bytes32[] memory hashes = new bytes32[](count);
        for (uint256 i = 0; i < count; ++i) {
            bytes calldata t = templates[i];
            if (!ShieldPayload.isCanonical(t, settlementAsset) || ShieldPayload.id(t) != id) {
                revert InvalidTemplates();
            }
            bytes32 h = keccak256(t);
            for (uint256 j = 0; j < i; ++j) {
                if (hashes[j] == h) revert InvalidTemplates();
            }
            hashes[i] = h;
        }
        bytes32 templatesHash = keccak256(abi.encodePacked(hashes));
        uint256 nonce = nonces[id];
        _checkOwnerSignature(
            id, a, keccak256(abi.encode(REGISTER_SHIELD_TEMPLATES_TYPEHASH, id, templatesHash, nonce, deadline)), signature
        );

        nonces[id] = nonce + 1;
        a.lastActivity = block.timestamp;
        _clearTemplates(id);
        for (uint256 i = 0; i < count; ++i) {
            ShieldPayload.Note memory note = ShieldPayload.decode(templates[i]);
            _templates[id][i] = Template({
                npk: note.npk,
                value: note.value,
                used: false,
                encryptedBundle: note.encryptedBundle,
                shieldKey: note.shieldKey
            });
        }
        _templateSetSize[id] = count;
        _templatesUnused[id] = count;
        emit ShieldTemplatesRegistered(id, count, templatesHash, nonce);
    }

    function shieldFromTemplate(bytes32 id, uint256 index) external nonReentrant {
        if (index >= _templateSetSize[id]) revert TemplateNotFound(index);
        Template storage t = _templates[id][index];
        if (t.used) revert TemplateAlreadyUsed(index);
        address adapter = shieldAdapter;
        if (adapter == address(0)) revert ShieldAdapterNotSet();
        uint256 value = t.value;
        uint256 balance = balanceOf[id][settlementAsset];
        if (balance < value) revert InsufficientBalance(balance, value);

        t.used = true;
        _templatesUnused[id] -= 1;
        balanceOf[id][settlementAsset] = balance - value;

        bytes memory payload = ShieldPayload.encode(_noteOf(id, t), settlementAsset);
        IERC20(settlementAsset).safeTransfer(adapter, value);
        IShieldAdapter(adapter).shield(payload);
        emit ShieldedFromTemplate(id, index, value);
    }

    function _noteOf(bytes32 id, Template storage t) private view returns (ShieldPayload.Note memory note) {
        note.id = id;
        note.npk = t.npk;
        note.value = t.value;
        note.encryptedBundle = t.encryptedBundle;
        note.shieldKey = t.shieldKey;
    }

    /// @dev Stale slots beyond the new set size are never read, so nothing is zeroed.
    function _clearTemplates(bytes32 id) private {
        uint256 unused = _templatesUnused[id];
        _templateSetSize[id] = 0;
        _templatesUnused[id] = 0;
        if (unused != 0) emit ShieldTemplatesCleared(id, unused);
    }

    // ------------------------------------------------------- owner actions

    function rotateOwner(bytes32 id, address newOwner, uint256 deadline, bytes calldata signature)
        external
        nonReentrant
    {
        _checkDeadline(deadline);
        Account storage a = _registered(id);
        if (newOwner == address(0)) revert InvalidOwner();
        uint256 nonce = nonces[id];
        _checkOwnerSignature(
            id, a, keccak256(abi.encode(ROTATE_OWNER_TYPEHASH, id, newOwner, nonce, deadline)), signature
        );
        address previousOwner = a.owner;
        nonces[id] = nonce + 1;
        a.owner = newOwner;
        a.lastActivity = block.timestamp;
        emit OwnerRotated(id, previousOwner, newOwner, nonce);
        // Templates encrypt to keys of the previous owner.
        _clearTemplates(id);
    }

    function ping(bytes32 id, uint256 deadline, bytes calldata signature) external nonReentrant {
        _checkDeadline(deadline);
        Account storage a = _registered(id);
        uint256 nonce = nonces[id];
        _checkOwnerSignature(id, a, keccak256(abi.encode(PING_TYPEHASH, id, nonce, deadline)), signature);
        nonces[id] = nonce + 1;
        a.lastActivity = block.timestamp;
        emit Pinged(id, nonce);
    }

    // ---------------------------------------------------------------- binds

    function proposeBind(bytes32 id, address newOwner, uint256 deadline, bytes[] calldata signatures)
        external
        nonReentrant
    {
        _checkDeadline(deadline);
        Account storage a = _registered(id);
        if (a.kind != KIND_HANDLE) revert NotHandleAccount(id);
        if (a.pendingOwner != address(0)) revert BindPending(id);
        if (newOwner == address(0)) revert InvalidOwner();
        uint256 threshold = attestorThreshold;
        if (threshold == 0) revert ThresholdNotSet();
        if (signatures.length < threshold) revert InsufficientAttestations(signatures.length, threshold);

        uint256 bindNonce = bindNonces[id];
        bytes32 digest =
            _hashTypedDataV4(keccak256(abi.encode(BIND_OWNER_TYPEHASH, id, newOwner, bindNonce, deadline)));
        address previous = address(0);
        for (uint256 i = 0; i < signatures.length; ++i) {
            (address signer, ECDSA.RecoverError err,) = ECDSA.tryRecoverCalldata(digest, signatures[i]);
            if (err != ECDSA.RecoverError.NoError) revert InvalidSignature();
            // Strictly ascending signers make duplicates impossible without a lookup table.
            if (signer <= previous) revert UnsortedSigners();
            if (!isAttestor[signer]) revert NotAttestor(signer);
            previous = signer;
        }

        uint256 readyAt = block.timestamp + bindDelay;
        bindNonces[id] = bindNonce + 1;
        a.pendingOwner = newOwner;
        a.pendingReadyAt = readyAt;
        emit BindProposed(id, newOwner, readyAt, bindNonce);
    }

    function finalizeBind(bytes32 id) external nonReentrant {
        Account storage a = _registered(id);
        address newOwner = a.pendingOwner;
        if (newOwner == address(0)) revert NoPendingBind(id);
        if (block.timestamp < a.pendingReadyAt) revert BindNotReady(a.pendingReadyAt);
        address previousOwner = a.owner;
        a.owner = newOwner;
        a.pendingOwner = address(0);
        a.pendingReadyAt = 0;
        a.lastActivity = block.timestamp;
        emit BindFinalized(id, previousOwner, newOwner);
        _clearTemplates(id);
    }

    function cancelBind(bytes32 id, uint256 deadline, bytes calldata signature) external nonReentrant {
        _checkDeadline(deadline);
        Account storage a = _registered(id);
        if (a.pendingOwner == address(0)) revert NoPendingBind(id);
        uint256 bindNonce = bindNonces[id];
        _checkOwnerSignature(
            id, a, keccak256(abi.encode(CANCEL_BIND_TYPEHASH, id, bindNonce, deadline)), signature
        );
        bindNonces[id] = bindNonce + 1;
        a.pendingOwner = address(0);
        a.pendingReadyAt = 0;
        emit BindCancelled(id, a.owner, false);
    }

    /// @notice An attestor stops a bind it believes fraudulent; the fallback sweep stays closed for two
    /// bind delays so that a vetoed account cannot be drained to its fallback meanwhile.
    function vetoBind(bytes32 id) external nonReentrant {
        if (!isAttestor[msg.sender]) revert NotAttestor(msg.sender);
        Account storage a = _registered(id);
        if (a.pendingOwner == address(0)) revert NoPendingBind(id);
        a.pendingOwner = address(0);
        a.pendingReadyAt = 0;
        a.sweepClosedUntil = block.timestamp + 2 * bindDelay;
        emit BindCancelled(id, msg.sender, true);
    }

    // ---------------------------------------------------------------- sweep

    function sweepToFallback(bytes32 id, address asset) external nonReentrant {
        Account storage a = _registered(id);
        address recipient = a.fallbackRecipient;
        if (recipient == address(0)) revert NoFallback(id);
        if (a.pendingOwner != address(0)) revert BindPending(id);
        if (block.timestamp < a.sweepClosedUntil) revert SweepClosed(a.sweepClosedUntil);
        // Subtraction first: a huge fallbackDelay must not overflow.
        if (block.timestamp - a.lastActivity < a.fallbackDelay) {
            revert FallbackNotDue(a.lastActivity + Math.min(a.fallbackDelay, type(uint256).max - a.lastActivity));
        }
        uint256 amount = balanceOf[id][asset];
        if (amount == 0) revert NothingToSweep();
        balanceOf[id][asset] = 0;
        IERC20(asset).safeTransfer(recipient, amount);
        emit SweptToFallback(id, asset, recipient, amount);
    }

    // --------------------------------------------------------------- launch

    function launch(address token, bytes32 beneficiaryId, bytes calldata beneficiaryHint) external {
        if (msg.sender != launcher) revert NotLauncher(msg.sender);
        emit TokenLaunched(token, beneficiaryId, beneficiaryHint);
    }

    // -------------------------------------------------------------- helpers

    function _checkDeadline(uint256 deadline) private view {
        if (block.timestamp > deadline) revert DeadlineExpired(deadline);
    }

    function _registered(bytes32 id) private view returns (Account storage a) {
        a = _accounts[id];
        if (a.kind == 0) revert NotRegistered(id);
    }

    /// @dev EOA owners sign 65 bytes; contract owners (code at the address) answer ERC-1271 for
    /// signatures of 1..2048 bytes.
    function _checkOwnerSignature(bytes32 id, Account storage a, bytes32 structHash, bytes calldata signature)
        private
        view
    {
        address owner = a.owner;
        if (owner == address(0)) revert OwnerNotSet(id);
        bytes32 digest = _hashTypedDataV4(structHash);
        bool valid;
        if (owner.code.length == 0) {
            valid = SignatureChecker.isValidSignatureNowCalldata(owner, digest, signature);
        } else {
            valid = signature.length != 0 && signature.length <= MAX_CONTRACT_SIGNATURE_LENGTH
                && SignatureChecker.isValidERC1271SignatureNowCalldata(owner, digest, signature);
        }
        if (!valid) revert InvalidSignature();
    }
}
