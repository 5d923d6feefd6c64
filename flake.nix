{
  description = "MCP Code Execution Mode: one MCP tool, run_python, in a hardened rootless container";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" "x86_64-darwin" "aarch64-darwin" ];
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});

      # The workspace members, one folder each under packages/ (scripts/check-flake checks that
      # this list and the folders agree). Names, versions and dependencies are read from each
      # member's pyproject.toml, so this file cannot drift from them.
      memberDirs = [
        "bridge-protocol"
        "bridge-core"
        "bridge-sandbox-client"
        "bridge-server"
        "bridge-image"
      ];
      projectOf = dir: (builtins.fromTOML (builtins.readFile (./packages + "/${dir}/pyproject.toml"))).project;
      distNameOf = dir: (projectOf dir).name;
      # The import package, from [tool.hatch.build.targets.wheel] packages = ["src/<name>"].
      importNameOf = dir: baseNameOf (builtins.head
        (builtins.fromTOML (builtins.readFile (./packages + "/${dir}/pyproject.toml")))
          .tool.hatch.build.targets.wheel.packages);
      # "cbor2>=6.1.4" -> "cbor2"; "mcp-bridge-protocol==0.1.0" -> "mcp-bridge-protocol"
      requirementName = requirement: builtins.head (builtins.match "([A-Za-z0-9._-]+).*" requirement);

      # One derivation per member. Siblings are this flake's own derivations: members release in
      # lockstep and pin each other exactly (==), so the pin is satisfied by construction.
      # Third-party dependencies come from nixpkgs' python3Packages under their PyPI names.
      membersFor = pkgs:
        let
          python = pkgs.python3;
          py = python.pkgs;
          members = builtins.listToAttrs (map (dir: {
            name = distNameOf dir;
            value = buildMember dir;
          }) memberDirs);
          # A dependency nixpkgs ships as a program rather than a python package (ty, the type
          # checker, which the core runs as a child process found on PATH) comes from pkgs.
          dependencyOf = requirement:
            let name = requirementName requirement;
            in members.${name} or py.${name} or pkgs.${name};
          buildMember = dir:
            let project = projectOf dir;
            in py.buildPythonPackage {
              pname = project.name;
              inherit (project) version;
              pyproject = true;
              src = ./packages + "/${dir}";
              build-system = [ py.hatchling ];
              dependencies = map dependencyOf (project.dependencies or [ ]);
              # The built package must at least import; `checks` runs its unit tests.
              pythonImportsCheck = [ (importNameOf dir) ];
              meta = {
                description = project.description or project.name;
                license = pkgs.lib.licenses.mit;
              };
            };
        in
        { inherit python members; };

      # The unit tests of one member against its built package (what tox does with the wheels):
      # tests are copied out of the source so the package, not the checkout, is imported.
      # pytest options that live in the root pyproject.toml are passed explicitly.
      # bridge-core and bridge-server tests start the sandbox client as a plain process.
      testedWith = {
        "bridge-core" = [ "mcp-bridge-sandbox-client" ];
        "bridge-server" = [ "mcp-bridge-sandbox-client" ];
      };
      checkFor = pkgs: dir:
        let
          m = membersFor pkgs;
          testEnv = m.python.withPackages (py:
            map (name: m.members.${name}) ([ (distNameOf dir) ] ++ (testedWith.${dir} or [ ]))
            ++ [ py.pytest py.pytest-timeout py.hypothesis py.anyio ]);
        in
        pkgs.runCommand "${distNameOf dir}-unit-tests" { nativeBuildInputs = [ testEnv ]; } ''
          cp -r ${./packages + "/${dir}/tests"} tests
          chmod -R u+w tests
          HOME=$TMPDIR python -m pytest tests -p no:cacheprovider --import-mode=importlib \
            -o anyio_mode=auto -o timeout=300 -m "not slow and not container"
          touch $out
        '';

      serverEnvFor = pkgs:
        let m = membersFor pkgs;
        in m.python.withPackages (_: [ m.members."mcp-code-execution-mode" ]);
    in
    {
      packages = forAllSystems (pkgs:
        (membersFor pkgs).members // {
          default = pkgs.writeShellScriptBin "mcp-code-execution-mode" ''
            exec ${serverEnvFor pkgs}/bin/python -m mcp_code_execution_mode "$@"
          '';
        });

      # `nix flake check`: each member's unit tests against its built package.
      checks = forAllSystems (pkgs: builtins.listToAttrs (map (dir: {
        name = distNameOf dir;
        value = checkFor pkgs dir;
      }) memberDirs));

      apps = forAllSystems (pkgs: {
        default = {
          type = "app";
          program = "${self.packages.${pkgs.stdenv.hostPlatform.system}.default}/bin/mcp-code-execution-mode";
        };
      });

      devShells = forAllSystems (pkgs:
        let
          m = membersFor pkgs;
          thirdParty = builtins.concatMap
            (dir: builtins.filter
              (r: !(m.members ? ${requirementName r}))
              ((projectOf dir).dependencies or [ ]))
            memberDirs;
        in
        {
          default = pkgs.mkShell {
            packages = [
              (m.python.withPackages (py:
                map (r: py.${requirementName r}) thirdParty
                ++ [ py.pytest py.pytest-timeout py.hypothesis py.mypy ]))
              pkgs.hatch
              pkgs.ruff
              pkgs.podman
            ];
            shellHook = ''
              echo "MCP Code Execution Mode dev shell: hatch run tests:all | hatch run lint:check"
            '';
          };
        });
    };
}
