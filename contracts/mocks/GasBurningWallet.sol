// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/// @notice ERC-1271 wallet for tests of what a relayer pays for: it accepts its owner's signatures
/// as SmartWallet does, but burns `burnGas` gas first, and refuses every signature while `failing`
/// is set (passing a simulation, then reverting on chain once its admin flips it). Everything lives
/// in storage, not in immutables, so every instance has the same code and code hash.
contract GasBurningWallet is IERC1271 {
    address public owner;
    address public admin;
    uint256 public burnGas;
    bool public failing;

    error NotAdmin();

    constructor(address owner_, uint256 burnGas_) {
        owner = owner_;
        admin = msg.sender;
        burnGas = burnGas_;
    }

    function setBurnGas(uint256 burnGas_) external {
        if (msg.sender != admin) revert NotAdmin();
        burnGas = burnGas_;
    }

    function setFailing(bool failing_) external {
        if (msg.sender != admin) revert NotAdmin();
        failing = failing_;
    }

    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        uint256 start = gasleft();
        uint256 target = burnGas;
        while (start - gasleft() < target) {}
        if (failing || signature.length < 65) return 0xffffffff;
        (address signer, ECDSA.RecoverError err,) = ECDSA.tryRecoverCalldata(hash, signature[:65]);
        if (err == ECDSA.RecoverError.NoError && signer == owner) return IERC1271.isValidSignature.selector;
        return 0xffffffff;
    }
}
