// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IShieldAdapter} from "./interfaces/IShieldAdapter.sol";
import {ShieldPayload} from "./libraries/ShieldPayload.sol";

/// @title ShieldAdapter
/// @notice Stands in for a privacy pool: keeps the tokens it receives and records a note for each shield.
/// The caller transfers the tokens first; the note's value is whatever arrived since the last shield,
/// whatever value the payload carried.
contract ShieldAdapter is IShieldAdapter, Ownable {
    address public immutable token;

    mapping(address account => bool) public isSanctioned;
    /// @dev Tokens already turned into notes; anything above it has arrived for the next shield.
    uint256 public shieldedTotal;
    uint256 public noteCount;

    event Shielded(
        uint256 indexed noteIndex,
        bytes32 indexed id,
        address indexed origin,
        bytes32 npk,
        address token,
        uint256 tokenSubID,
        uint120 value,
        bytes32[3] encryptedBundle,
        bytes32 shieldKey
    );
    event SanctionSet(address indexed account, bool sanctioned);

    error SanctionedOrigin(address origin);
    error NonCanonicalPayload();
    error NothingToShield();
    error ValueTooLarge(uint256 value);

    constructor(address token_, address admin) Ownable(admin) {
        token = token_;
    }

    function setSanctioned(address account, bool sanctioned) external onlyOwner {
        isSanctioned[account] = sanctioned;
        emit SanctionSet(account, sanctioned);
    }

    function shield(bytes calldata payload) external returns (uint256 noteIndex) {
        // Screening the transaction origin mirrors privacy pools that refuse sanctioned submitters.
        // solhint-disable-next-line avoid-tx-origin
        if (isSanctioned[tx.origin]) revert SanctionedOrigin(tx.origin);
        if (!ShieldPayload.isCanonical(payload, token)) revert NonCanonicalPayload();
        uint256 held = IERC20(token).balanceOf(address(this));
        uint256 received = held - shieldedTotal;
        if (received == 0) revert NothingToShield();
        if (received > type(uint120).max) revert ValueTooLarge(received);
        shieldedTotal = held;

        ShieldPayload.Note memory note = ShieldPayload.decode(payload);
        noteIndex = noteCount++;
        emit Shielded(
            noteIndex,
            note.id,
            tx.origin,
            note.npk,
            token,
            0,
            uint120(received),
            note.encryptedBundle,
            note.shieldKey
        );
    }
}
