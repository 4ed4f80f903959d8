/**
 * Canonical wire examples of every body of both specs: what a conforming client sends and what
 * the services answer. Canonical means addresses EIP-55, hex lowercase, decimals without padding.
 */
const hex = (byte: string, bytes: number) => `0x${byte.repeat(bytes)}`

// EIP-55 test vectors.
export const addr = {
  a: "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
  b: "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
  c: "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
  d: "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
  zero: "0x0000000000000000000000000000000000000000"
} as const

export const id = hex("11", 32)
export const salt = hex("22", 32)
export const commitment = hex("33", 32)
export const txHash = hex("44", 32)
export const dataHash = "0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
export const sig65 = hex("ab", 65)
export const sig1271 = hex("cd", 100)
export const template = hex("5a", 320)
export const FULL = (2n ** 256n - 1n).toString()
export const QUOTED_Q = (2n ** 255n + 1000n).toString()

export const claim = {
  beneficiaryId: id,
  asset: addr.a,
  amount: "1000000000000000000",
  adapter: addr.zero,
  dataHash,
  relayer: addr.b,
  relayerFee: "1000",
  nonce: "0",
  deadline: "1900000000"
}

export const registerOwner = {
  kind: 1,
  owner: addr.c,
  salt,
  fallbackRecipient: addr.d,
  fallbackDelay: "31536000"
}

export const registerHandle = {
  kind: 2,
  handleCommitment: commitment,
  fallbackRecipient: addr.zero,
  fallbackDelay: "0"
}

export const consolidateStep = {
  assetIn: addr.d,
  amountIn: QUOTED_Q,
  minOut: "500",
  deadline: "1900000000",
  signature: sig65
}

export const fee = {
  claim: { ...claim, amount: "1000", relayerFee: "1000", nonce: "1", adapter: addr.zero },
  signature: sig65
}

export const relayer = {
  RelayerConfig: {
    chainId: 31337,
    vault: addr.a,
    relayer: addr.b,
    settlementAsset: addr.c,
    adapters: { direct: addr.zero, shield: addr.d },
    minDeadlineSeconds: 120,
    quoteTtlSeconds: 60
  },
  QuoteQuery: {
    asset: addr.a,
    adapter: addr.zero,
    action: "shield-templates",
    templates: "32",
    consolidate: "1",
    register: "1"
  },
  QuoteResponse: {
    chainId: 31337,
    vault: addr.a,
    asset: addr.c,
    adapter: addr.zero,
    action: "claim",
    relayer: addr.b,
    relayerFee: "123456789",
    gasEstimate: "250000",
    gasPrice: "1000000000",
    validUntil: 1900000060
  },
  ClaimRequest: {
    claim: { ...claim, amount: FULL, adapter: addr.d, relayer: addr.zero, nonce: "1" },
    adapterData: template,
    signature: sig1271,
    register: registerOwner,
    consolidate: consolidateStep
  },
  ConsolidateRequest: { id, consolidate: consolidateStep, register: registerHandle, fee },
  ShieldTemplatesRequest: {
    id,
    templates: [template, hex("5b", 320)],
    deadline: "1900000000",
    signature: sig65,
    fee
  },
  RotateOwnerRequest: { id, newOwner: addr.d, deadline: "1900000000", signature: sig65, fee },
  PingRequest: { id, deadline: "1900000000", signature: sig65, register: registerOwner, fee },
  CancelBindRequest: { id, deadline: "1900000000", signature: sig65 },
  ProposeBindRequest: {
    id,
    newOwner: addr.c,
    deadline: "1900000000",
    signatures: [sig65, hex("ac", 65)],
    register: registerHandle
  },
  FinalizeBindRequest: { id },
  TxHashResponse: { txHash },
  TxStatusRequest: { txHash },
  TxStatus: { txHash, status: "success", blockNumber: 1234 },
  AccountsResponse: {
    chainId: 31337,
    vault: addr.a,
    block: 99,
    accounts: [
      {
        id,
        kind: 1,
        owner: addr.c,
        fallbackRecipient: addr.d,
        fallbackDelay: "31536000",
        pendingOwner: null,
        pendingReadyAt: null,
        balances: { [addr.a]: "5", [addr.b]: "0" },
        totalDeposited: { [addr.a]: "10", [addr.b]: "7" },
        lastActivityBlock: 42,
        shieldTemplates: 3,
        nonce: "4",
        bindNonce: "0"
      },
      {
        id: hex("12", 32),
        kind: 2,
        owner: addr.zero,
        fallbackRecipient: null,
        fallbackDelay: null,
        pendingOwner: addr.b,
        pendingReadyAt: "1900003600",
        balances: {},
        totalDeposited: {},
        lastActivityBlock: 0,
        shieldTemplates: 0,
        nonce: "0",
        bindNonce: "1"
      }
    ]
  },
  HealthResponse: {
    ok: true,
    chainId: 31337,
    block: 0,
    sender: {
      address: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
      pending: 1,
      nextNonce: "7",
      balance: "10000000000000000000000"
    }
  }
} as const

const session = "sEsSiOn_token-0123456789.abc~"

export const attestor = {
  AttestorInfo: {
    chainId: 31337,
    vault: addr.a,
    attestor: addr.b,
    hintPublicKey: `0x02${"7f".repeat(32)}`,
    platforms: ["microblog", "messenger", "codehost", "fedsocial", "community"],
    bindDeadlineSeconds: 86400,
    handleLookup: {
      mode: "paid",
      platforms: ["microblog", "codehost", "fedsocial"],
      price: {
        network: "eip155:31337",
        asset: addr.c,
        amount: "10000",
        decimals: 6,
        symbol: "USDT",
        payTo: addr.d,
        assetTransferMethod: "permit2-exact"
      }
    }
  },
  AttestorInfoOff: {
    chainId: 56,
    vault: addr.a,
    attestor: addr.b,
    hintPublicKey: `0x03${"7f".repeat(32)}`,
    platforms: ["messenger"],
    bindDeadlineSeconds: 3600,
    handleLookup: { mode: "off", platforms: [], price: null }
  },
  CommitmentRequest: { platform: "microblog", handle: "@alice" },
  CommitmentResponse: {
    platform: "messenger",
    platformId: 2,
    userId: "123456789",
    userIdHash: hex("01", 32),
    nonce: hex("02", 32),
    attestorSalt: hex("03", 32),
    handleCommitment: commitment,
    kind: 2,
    attestor: addr.b,
    attestorPubKey: `0x04${"aa".repeat(64)}`
  },
  Hint: {
    platformId: 4,
    userId: "3",
    nonce: hex("02", 32),
    attestorSalt: hex("03", 32),
    fallbackRecipient: addr.d,
    fallbackDelay: "86400"
  },
  PublicHandleRequest: { platform: "codehost", handle: "octocat" },
  PublicHandleResponse: {
    platform: "codehost",
    platformId: 3,
    userId: "583231",
    handle: "octocat",
    issuedAt: "1700000000",
    attestation: sig65,
    attestor: addr.b,
    handleCommitment: commitment,
    userIdHash: hex("01", 32),
    nonce: hex("02", 32),
    attestorSalt: hex("03", 32),
    kind: 2,
    attestorPubKey: `0x04${"aa".repeat(64)}`
  },
  OAuthStartRequest: { stealthOwner: addr.c, ids: [id], redirect: "https://app.example/after-login" },
  OAuthStartResponse: {
    url: "https://provider.example/authorize?state=abcdefghijklmnop",
    state: "abcdefghijklmnop"
  },
  FedsocialStartResponse: {
    nonce: "abcdefgh12345678",
    domain: "attestor.example",
    uri: "https://attestor.example/login",
    expirationTime: "2030-01-01T00:10:00.000Z"
  },
  LegacyOAuthStartQuery: { stealthOwner: addr.c, redirect: "https://app.example/", format: "json" },
  OAuthCallbackQuery: { code: "provider-code", state: "abcdefghijklmnop" },
  MessengerVerifyRequest: {
    auth: {
      id: 123456789,
      first_name: "Ada",
      username: "ada",
      photo_url: "https://t.example/p.jpg",
      auth_date: 1700000000,
      hash: "ab".repeat(32)
    },
    stealthOwner: addr.c,
    id
  },
  FedsocialVerifyRequest: { message: "attestor.example wants you to sign in…", signature: sig65 },
  SessionResponse: {
    session,
    platform: "community",
    userId: "80351110224678912",
    stealthOwner: addr.c,
    ids: [],
    expiresAt: "1700000900"
  },
  EscrowsRequest: { session },
  EscrowsResponse: {
    escrows: [
      {
        id,
        registered: false,
        owner: null,
        pendingOwner: null,
        pendingReadyAt: null,
        register: registerHandle,
        visibility: "private"
      },
      {
        id: hex("12", 32),
        registered: true,
        owner: addr.zero,
        pendingOwner: addr.c,
        pendingReadyAt: "1700003600",
        register: null,
        visibility: "public"
      }
    ]
  },
  BindRequest: { session, ids: [id], contest: true, deadline: "1700086400", visibility: "private" },
  BindResponse: {
    binds: [
      {
        beneficiaryId: id,
        newOwner: addr.c,
        bindNonce: "0",
        deadline: "1700086400",
        signature: sig65,
        attestor: addr.b,
        register: registerHandle
      },
      {
        beneficiaryId: hex("12", 32),
        newOwner: addr.c,
        bindNonce: "3",
        deadline: "1700086400",
        signature: sig65,
        attestor: addr.b,
        register: null
      }
    ]
  },
  PaymentRequiredHeader: {
    x402Version: 2,
    error: "PAYMENT-SIGNATURE header is required",
    resource: {
      url: "https://attestor.example/v1/commitment",
      description: "Handle lookup",
      mimeType: "application/json"
    },
    accepts: [
      {
        scheme: "exact",
        network: "eip155:56",
        asset: addr.c,
        amount: "10000",
        payTo: addr.d,
        maxTimeoutSeconds: 300,
        extra: {
          assetTransferMethod: "permit2-exact",
          name: "Tether USD",
          version: "1",
          signerAddress: addr.a,
          spenderAddress: addr.b
        }
      }
    ]
  },
  PaymentRequiredHeaderPermit2: {
    x402Version: 2,
    resource: {
      url: "https://attestor.example/v1/commitment",
      description: "Handle lookup",
      mimeType: "application/json"
    },
    accepts: [
      {
        scheme: "exact",
        network: "eip155:8453",
        asset: addr.c,
        amount: "10000",
        payTo: addr.d,
        maxTimeoutSeconds: 300,
        extra: { assetTransferMethod: "permit2", name: "USD Coin", version: "2" }
      }
    ]
  },
  AttestorHealthResponse: { ok: true }
} as const
