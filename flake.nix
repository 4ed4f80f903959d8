{
  description = "Fee vault relayer and attestor";

  # Release 25.11, for nodejs_20: later nixpkgs marks it insecure (Node 20's end of life was
  # 2026-04-30) and drops it.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.11";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" "x86_64-darwin" "aarch64-darwin" ];
      forAll = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
    in {
      devShells = forAll (pkgs: {
        default = pkgs.mkShell {
          packages = [
            # The oldest Node that package.json's engines (>=20.15) accept; Node 20, 22 and 24 are
            # supported.
            pkgs.nodejs_20
            pkgs.postgresql_16
          ];
          shellHook = ''
            echo "npm ci, then: npm run devnet | npm test"
          '';
        };
      });
    };
}
