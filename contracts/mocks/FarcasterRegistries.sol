// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice Devnet stand-in of Farcaster's IdRegistry (docs/protocol.md §9): the views Sign In With Farcaster
/// reads (`idOf`, `custodyOf`). Placed at the canonical address with anvil_setCode; fids are
/// registered once each by `register`, which the real registry gates behind its gateway.
contract IdRegistryStandIn {
    mapping(address custody => uint256 fid) public idOf;
    mapping(uint256 fid => address custody) public custodyOf;

    error AlreadyRegistered();

    function register(address custody, uint256 fid) external {
        if (fid == 0 || custodyOf[fid] != address(0) || idOf[custody] != 0) revert AlreadyRegistered();
        idOf[custody] = fid;
        custodyOf[fid] = custody;
    }
}

/// @notice Devnet stand-in of Farcaster's KeyRegistry (docs/protocol.md §9): `keyDataOf`, the view that says
/// whether an address is an auth address (key type 2, state added) of a fid.
contract KeyRegistryStandIn {
    struct KeyData {
        uint8 state;
        uint32 keyType;
    }

    mapping(uint256 fid => mapping(bytes key => KeyData)) internal keys;

    function keyDataOf(uint256 fid, bytes calldata key) external view returns (KeyData memory) {
        return keys[fid][key];
    }

    /// @dev The real registry adds keys through its gateway with the custody's signature.
    function add(uint256 fid, bytes calldata key, uint32 keyType) external {
        keys[fid][key] = KeyData({state: 1, keyType: keyType});
    }
}
