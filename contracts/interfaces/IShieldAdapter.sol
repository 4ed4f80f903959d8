// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice What the vault needs from a shield adapter: tokens are transferred to it first, then it is
/// called with the canonical payload and shields exactly what it received.
interface IShieldAdapter {
    function shield(bytes calldata payload) external returns (uint256 noteIndex);
}
