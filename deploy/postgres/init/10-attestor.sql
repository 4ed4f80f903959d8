-- Runs once, on an empty data directory: the attestor keeps its own database beside the relayer's
-- (POSTGRES_DB), since each service indexes the vault into its own tables.
CREATE DATABASE attestor;
