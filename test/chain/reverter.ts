/**
 * A tiny contract for the chain client's tests: a custom error, a reason string, a panic, a view
 * and an event. Compiled with the solc npm package when the test starts.
 */
import solc from "solc"
import { type Abi, type Hex, parseAbi } from "viem"

const source = `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

contract Reverter {
    error Nope(uint256 code);

    event Poked(address indexed by, uint256 value);

    uint256 public value = 7;

    function nope(uint256 code) external pure returns (uint256) {
        revert Nope(code);
    }

    function refuse() external pure returns (uint256) {
        revert("not allowed");
    }

    function divide(uint256 by) external pure returns (uint256) {
        return 10 / by;
    }

    function expectValue(uint256 expected) external view returns (uint256) {
        if (value != expected) revert Nope(value);
        return value;
    }

    function poke(uint256 newValue) external {
        if (newValue == 0) revert Nope(0);
        value = newValue;
        emit Poked(msg.sender, newValue);
    }
}
`

/** The ABI as viem infers it, so reads and logs are typed in the tests. */
export const reverterAbi = parseAbi([
  "error Nope(uint256 code)",
  "event Poked(address indexed by, uint256 value)",
  "function value() view returns (uint256)",
  "function nope(uint256 code) pure returns (uint256)",
  "function refuse() pure returns (uint256)",
  "function divide(uint256 by) pure returns (uint256)",
  "function expectValue(uint256 expected) view returns (uint256)",
  "function poke(uint256 newValue)"
])

interface SolcOutput {
  readonly errors?: ReadonlyArray<{ readonly severity: string; readonly formattedMessage: string }>
  readonly contracts?: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>
}

export const compileReverter = (): { readonly abi: Abi; readonly bytecode: Hex } => {
  const compile: (input: string) => string = solc.compile
  const output = JSON.parse(
    compile(
      JSON.stringify({
        language: "Solidity",
        sources: { "Reverter.sol": { content: source } },
        settings: { evmVersion: "cancun", outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } } }
      })
    )
  ) as SolcOutput
  const errors = (output.errors ?? []).filter((e) => e.severity === "error")
  if (errors.length > 0) throw new Error(errors.map((e) => e.formattedMessage).join("\n"))
  const compiled = output.contracts?.["Reverter.sol"]?.Reverter
  if (compiled === undefined) throw new Error("solc produced no Reverter")
  return { abi: compiled.abi, bytecode: `0x${compiled.evm.bytecode.object}` }
}
