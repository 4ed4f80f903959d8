// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";

/// @notice The part of Permit2's SignatureTransfer this proxy calls (Uniswap's ISignatureTransfer).
interface ISignatureTransfer {
    struct TokenPermissions {
        address token;
        uint256 amount;
    }

    struct PermitTransferFrom {
        TokenPermissions permitted;
        uint256 nonce;
        uint256 deadline;
    }

    struct SignatureTransferDetails {
        address to;
        uint256 requestedAmount;
    }

    function permitWitnessTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external;
}

/// @notice Devnet stand-in of x402's exact-Permit2 proxy (docs/protocol.md §9 "x402", §10 "Paid lookups"):
/// the Permit2 spender that x402 `exact` payments with the permit2 method name. A facilitator calls
/// `settle` with the payer's `PermitWitnessTransferFrom` signature; the proxy moves exactly the
/// permitted amount to the witness's `to`, so a facilitator can neither change the amount nor
/// redirect the funds. The ABI is the one the x402 EVM package (2.27) calls: `settle`, `settleWithPermit`,
/// `PERMIT2`, `WITNESS_TYPEHASH`, `WITNESS_TYPE_STRING`, and the errors it maps.
/// @dev The devnet etches this contract's runtime code at the canonical proxy address, so nothing
/// may depend on the address it was deployed at: Permit2 is a constant, there are no immutables
/// and no storage. It holds no funds and keeps no state, so it needs no reentrancy guard.
contract X402ExactPermit2Proxy {
    /// @notice Permit2 at its canonical address, where the devnet installs it too.
    ISignatureTransfer public constant PERMIT2 = ISignatureTransfer(0x000000000022D473030F116dDEE9F6B43aC78BA3);

    /// @notice The witness part of the signed type, as Permit2 expects it (types after the
    /// primary one in alphabetical order: TokenPermissions < Witness).
    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,uint256 validAfter)";

    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,uint256 validAfter)");

    /// @notice Bound by the payer's signature: where the money goes and from when it may move.
    /// The upper time bound is Permit2's own `deadline`.
    struct Witness {
        address to;
        uint256 validAfter;
    }

    struct EIP2612Permit {
        uint256 value;
        uint256 deadline;
        bytes32 r;
        bytes32 s;
        uint8 v;
    }

    event Settled();
    event SettledWithPermit();

    error InvalidAmount();
    error InvalidDestination();
    error InvalidOwner();
    error PaymentTooEarly();
    error Permit2612AmountMismatch();

    /// @notice Settles with a Permit2 signature, the payer having approved Permit2 already.
    function settle(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external {
        _settle(permit, owner, witness, signature);
        emit Settled();
    }

    /// @notice Settles after submitting the payer's EIP-2612 approval of Permit2. A failing permit
    /// is ignored (the approval may exist already); Permit2 then refuses if it does not.
    function settleWithPermit(
        EIP2612Permit calldata permit2612,
        ISignatureTransfer.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external {
        if (permit2612.value != permit.permitted.amount) revert Permit2612AmountMismatch();
        try IERC20Permit(permit.permitted.token).permit(
            owner, address(PERMIT2), permit2612.value, permit2612.deadline, permit2612.v, permit2612.r, permit2612.s
        ) {} catch {}
        _settle(permit, owner, witness, signature);
        emit SettledWithPermit();
    }

    function _settle(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) private {
        // A zero amount would burn the payer's nonce for nothing.
        if (permit.permitted.amount == 0) revert InvalidAmount();
        if (owner == address(0)) revert InvalidOwner();
        if (witness.to == address(0)) revert InvalidDestination();
        if (block.timestamp < witness.validAfter) revert PaymentTooEarly();
        // Permit2 hashes this witness into the signed message, so `to` cannot be swapped.
        bytes32 witnessHash = keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.validAfter));
        PERMIT2.permitWitnessTransferFrom(
            permit,
            ISignatureTransfer.SignatureTransferDetails({to: witness.to, requestedAmount: permit.permitted.amount}),
            owner,
            witnessHash,
            WITNESS_TYPE_STRING,
            signature
        );
    }
}
