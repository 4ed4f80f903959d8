// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IUniswapV2Router} from "../interfaces/IUniswapV2Router.sol";

/// @notice Uniswap-V2-style router with fixed, settable rates. It takes the input tokens and pays the
/// output out of its own balance, so it must be funded. Reverts with the Uniswap V2 reason strings.
contract MockSwapRouter is IUniswapV2Router {
    using SafeERC20 for IERC20;

    uint256 public constant RATE_SCALE = 1e18;

    /// @dev amountOut = amountIn * rate / 1e18, in raw units (decimals included in the rate).
    mapping(address tokenIn => mapping(address tokenOut => uint256)) public rates;

    event RateSet(address indexed tokenIn, address indexed tokenOut, uint256 rate);

    function setRate(address tokenIn, address tokenOut, uint256 rate) external {
        rates[tokenIn][tokenOut] = rate;
        emit RateSet(tokenIn, tokenOut, rate);
    }

    function getAmountsOut(uint256 amountIn, address[] calldata path)
        public
        view
        returns (uint256[] memory amounts)
    {
        require(path.length >= 2, "UniswapV2Library: INVALID_PATH");
        amounts = new uint256[](path.length);
        amounts[0] = amountIn;
        for (uint256 i = 0; i + 1 < path.length; ++i) {
            uint256 rate = rates[path[i]][path[i + 1]];
            require(rate != 0, "UniswapV2Library: INSUFFICIENT_LIQUIDITY");
            amounts[i + 1] = amounts[i] * rate / RATE_SCALE;
        }
    }

    function swapExactTokensForTokens(
        uint256 amountIn,
        uint256 amountOutMin,
        address[] calldata path,
        address to,
        uint256 deadline
    ) external returns (uint256[] memory amounts) {
        require(deadline >= block.timestamp, "UniswapV2Router: EXPIRED");
        amounts = getAmountsOut(amountIn, path);
        uint256 amountOut = amounts[amounts.length - 1];
        require(amountOut >= amountOutMin, "UniswapV2Router: INSUFFICIENT_OUTPUT_AMOUNT");
        IERC20(path[0]).safeTransferFrom(msg.sender, address(this), amountIn);
        IERC20(path[path.length - 1]).safeTransfer(to, amountOut);
    }
}
