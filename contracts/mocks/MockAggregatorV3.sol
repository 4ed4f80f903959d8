// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice Chainlink AggregatorV3-style price feed whose answer and decimals are set by hand.
contract MockAggregatorV3 {
    uint8 public decimals;
    string public description;
    uint256 public constant version = 4;

    uint80 private _roundId;
    int256 private _answer;
    uint256 private _updatedAt;

    event AnswerUpdated(int256 indexed current, uint256 indexed roundId, uint256 updatedAt);

    error NoRound(uint80 roundId);

    constructor(uint8 decimals_, int256 answer_, string memory description_) {
        decimals = decimals_;
        description = description_;
        setAnswer(answer_);
    }

    function setAnswer(int256 answer_) public {
        _roundId += 1;
        _answer = answer_;
        _updatedAt = block.timestamp;
        emit AnswerUpdated(answer_, _roundId, block.timestamp);
    }

    function setDecimals(uint8 decimals_) external {
        decimals = decimals_;
    }

    function latestAnswer() external view returns (int256) {
        return _answer;
    }

    function latestRoundData()
        external
        view
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)
    {
        return (_roundId, _answer, _updatedAt, _updatedAt, _roundId);
    }

    /// @dev Only the latest round is kept.
    function getRoundData(uint80 roundId_)
        external
        view
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)
    {
        if (roundId_ != _roundId) revert NoRound(roundId_);
        return (_roundId, _answer, _updatedAt, _updatedAt, _roundId);
    }
}
