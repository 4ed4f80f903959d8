/** Alias kept for src/attestor; use ./TxSenderShape.ts. */
export * from "./TxSenderShape.js"
