// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/// @notice Minimal ERC-1271 wallet: a signature is valid when its EOA owner signed the hash itself.
contract SmartWallet is IERC1271 {
    address public immutable owner;

    error NotOwner();

    constructor(address owner_) {
        owner = owner_;
    }

    /// @dev The first 65 bytes are the owner's signature; trailing bytes are ignored so that tests can
    /// exercise a verifier's signature length bounds with signatures this wallet accepts.
    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        if (signature.length < 65) return 0xffffffff;
        (address signer, ECDSA.RecoverError err,) = ECDSA.tryRecoverCalldata(hash, signature[:65]);
        if (err == ECDSA.RecoverError.NoError && signer == owner) return IERC1271.isValidSignature.selector;
        return 0xffffffff;
    }

    /// @dev Lets the wallet act on-chain, for example to approve and deposit.
    function execute(address target, uint256 value, bytes calldata data) external payable returns (bytes memory) {
        if (msg.sender != owner) revert NotOwner();
        (bool ok, bytes memory result) = target.call{value: value}(data);
        if (!ok) {
            assembly ("memory-safe") {
                revert(add(result, 0x20), mload(result))
            }
        }
        return result;
    }
}
