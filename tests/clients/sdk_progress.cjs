// The official TypeScript SDK (npm @modelcontextprotocol/sdk) as a client of ccm over stdio:
// one slow conda_create (the fixture conda, CONDA_FIXTURE_FETCH_SECONDS per package) with a
// 10 s request timeout. Mode "progress": with an onprogress callback (the SDK then sends a
// progressToken) and resetTimeoutOnProgress; mode "plain": neither. Prints one JSON
// object: the notifications seen, the result or the error, the time taken.
//
// Usage: node sdk_progress.cjs SDK_DIR CCM CONDA MODE PACKAGE...
//   SDK_DIR: a directory whose node_modules holds @modelcontextprotocol/sdk
"use strict";
const path = require("node:path");
const { createRequire } = require("node:module");

const [sdkDir, ccm, conda, mode, ...packages] = process.argv.slice(2);
const sdk = createRequire(path.join(path.resolve(sdkDir), "package.json"));
const { Client } = sdk("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = sdk("@modelcontextprotocol/sdk/client/stdio.js");
const { CallToolResultSchema } = sdk("@modelcontextprotocol/sdk/types.js");

async function main() {
  const transport = new StdioClientTransport({
    command: ccm,
    args: ["--conda-exe", conda, "--allow-write"],
    env: { ...process.env },
    stderr: "ignore",
  });
  const client = new Client({ name: "ccm-progress-test", version: "1" });
  await client.connect(transport);
  const seen = { mode, progress: [] };
  const options = { timeout: 10_000 };
  if (mode === "progress") {
    options.resetTimeoutOnProgress = true;
    options.onprogress = (p) => seen.progress.push(p);
  }
  const started = Date.now();
  try {
    const result = await client.request(
      {
        method: "tools/call",
        params: {
          name: "conda_create",
          arguments: { name: "t1", json: true, yes: true, packages },
        },
      },
      CallToolResultSchema,
      options,
    );
    seen.result = {
      isError: result.isError ?? false,
      command: result.structuredContent?.parsed_json?.command ?? null,
      stdout: result.structuredContent?.stdout ?? null,
    };
  } catch (error) {
    seen.error = { code: error.code ?? null, message: String(error.message) };
  }
  seen.elapsed_ms = Date.now() - started;
  await client.close();
  process.stdout.write(JSON.stringify(seen) + "\n");
}

main().catch((error) => {
  process.stderr.write(String(error && error.stack ? error.stack : error) + "\n");
  process.exit(1);
});
