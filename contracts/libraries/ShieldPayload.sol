// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice The canonical shield payload: abi.encode(bytes32 id, ShieldRequest) where
/// ShieldRequest = ((npk, (tokenType, tokenAddress, tokenSubID), value), (encryptedBundle[3], shieldKey)).
/// Every member is static, so the encoding is exactly ten 32-byte words.
library ShieldPayload {
    uint256 internal constant LENGTH = 320;

    uint256 private constant W_ID = 0;
    uint256 private constant W_NPK = 1;
    uint256 private constant W_TOKEN_TYPE = 2;
    uint256 private constant W_TOKEN_ADDRESS = 3;
    uint256 private constant W_TOKEN_SUB_ID = 4;
    uint256 private constant W_VALUE = 5;
    uint256 private constant W_BUNDLE = 6;
    uint256 private constant W_SHIELD_KEY = 9;

    struct Note {
        bytes32 id;
        bytes32 npk;
        uint120 value;
        bytes32[3] encryptedBundle;
        bytes32 shieldKey;
    }

    function word(bytes calldata payload, uint256 index) internal pure returns (bytes32) {
        return bytes32(payload[index * 32:(index + 1) * 32]);
    }

    /// @dev Canonical apart from the id, which only the caller can know.
    function isCanonical(bytes calldata payload, address asset) internal pure returns (bool) {
        if (payload.length != LENGTH) return false;
        if (word(payload, W_TOKEN_TYPE) != bytes32(0)) return false;
        if (word(payload, W_TOKEN_ADDRESS) != bytes32(uint256(uint160(asset)))) return false;
        if (word(payload, W_TOKEN_SUB_ID) != bytes32(0)) return false;
        uint256 value = uint256(word(payload, W_VALUE));
        return value != 0 && value <= type(uint120).max;
    }

    function id(bytes calldata payload) internal pure returns (bytes32) {
        return word(payload, W_ID);
    }

    /// @dev Expects a payload already checked with isCanonical.
    function decode(bytes calldata payload) internal pure returns (Note memory note) {
        note.id = word(payload, W_ID);
        note.npk = word(payload, W_NPK);
        note.value = uint120(uint256(word(payload, W_VALUE)));
        note.encryptedBundle[0] = word(payload, W_BUNDLE);
        note.encryptedBundle[1] = word(payload, W_BUNDLE + 1);
        note.encryptedBundle[2] = word(payload, W_BUNDLE + 2);
        note.shieldKey = word(payload, W_SHIELD_KEY);
    }

    function encode(Note memory note, address asset) internal pure returns (bytes memory) {
        return abi.encode(
            note.id,
            note.npk,
            uint256(0),
            asset,
            uint256(0),
            uint256(note.value),
            note.encryptedBundle,
            note.shieldKey
        );
    }
}
