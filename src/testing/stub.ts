/** Alias kept for src/attestor; use ../stubLayer.ts. */
export * from "../stubLayer.js"
