#!/usr/bin/env node
// Compiles the contracts with solc-js (standard JSON) and writes one artifact per contract:
//   src/*.sol  -> ../cvm/chain/artifacts/<Name>.json   (shipped with the Python package)
//   test/*.sol -> ../tests/chain/artifacts/<Name>.json  (test-only contracts)
//   src/examples/*.sol -> ../examples/artifacts/<Name>.json  (the examples' consumers, not shipped)
// With --check, compiles and compares instead of writing; exits 1 if any artifact differs.
"use strict";

const fs = require("fs");
const path = require("path");
const solc = require("solc");

const HERE = __dirname;
const TARGETS = [
  { dir: "src", out: path.join(HERE, "..", "cvm", "chain", "artifacts") },
  { dir: "test", out: path.join(HERE, "..", "tests", "chain", "artifacts") },
  { dir: "src/examples", out: path.join(HERE, "..", "examples", "artifacts") },
];
const SETTINGS = {
  evmVersion: "prague",
  optimizer: { enabled: true, runs: 200 },
  outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] } },
};

function sources() {
  const out = {};
  for (const { dir } of TARGETS) {
    for (const name of fs.readdirSync(path.join(HERE, dir)).sort()) {
      if (name.endsWith(".sol")) {
        out[`${dir}/${name}`] = { content: fs.readFileSync(path.join(HERE, dir, name), "utf8") };
      }
    }
  }
  return out;
}

function compile() {
  const input = { language: "Solidity", sources: sources(), settings: SETTINGS };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  let failed = false;
  for (const e of output.errors || []) {
    console.error(e.formattedMessage || e.message);
    if (e.severity === "error") failed = true;
  }
  if (failed) process.exit(1);
  return [input, output];
}

function isLibrary(input, sourceName, name) {
  return new RegExp(`\\blibrary\\s+${name}\\b`).test(input.sources[sourceName].content);
}

// Artifacts of the contracts that can be deployed (not interfaces, not internal libraries).
function artifacts(input, output) {
  const result = [];
  for (const { dir, out } of TARGETS) {
    for (const [sourceName, contracts] of Object.entries(output.contracts)) {
      if (path.posix.dirname(sourceName) !== dir) continue;
      for (const [name, c] of Object.entries(contracts)) {
        if (!c.evm.bytecode.object || isLibrary(input, sourceName, name)) continue;
        const artifact = {
          contractName: name,
          sourceName,
          compiler: { version: solc.version(), settings: { evmVersion: SETTINGS.evmVersion, optimizer: SETTINGS.optimizer } },
          abi: c.abi,
          bytecode: "0x" + c.evm.bytecode.object,
          deployedBytecode: "0x" + c.evm.deployedBytecode.object,
        };
        result.push({ file: path.join(out, `${name}.json`), text: JSON.stringify(artifact, null, 2) + "\n" });
      }
    }
  }
  return result;
}

function main() {
  const check = process.argv.includes("--check");
  const list = artifacts(...compile());
  let stale = 0;
  for (const { file, text } of list) {
    const rel = path.relative(path.join(HERE, ".."), file);
    if (check) {
      const old = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : null;
      if (old !== text) {
        console.error(`stale artifact: ${rel}`);
        stale += 1;
      }
    } else {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, text);
      console.log(`wrote ${rel}`);
    }
  }
  if (check) {
    const expected = new Set(list.map(({ file }) => file));
    for (const { out } of TARGETS) {
      for (const name of fs.existsSync(out) ? fs.readdirSync(out) : []) {
        if (name.endsWith(".json") && !expected.has(path.join(out, name))) {
          console.error(`artifact without a source: ${path.relative(path.join(HERE, ".."), path.join(out, name))}`);
          stale += 1;
        }
      }
    }
    if (stale) {
      console.error(`${stale} artifact(s) differ from the sources: run 'node contracts/compile.js'`);
      process.exit(1);
    }
    console.log(`${list.length} artifacts match (solc ${solc.version()})`);
  }
}

main();
