import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';
import { projectRoot } from './engines.ts';

// The api process runs from a build, not under tsx. tsx compiles with esbuild's keepNames, which
// names every closure bound to a name (Object.defineProperty) each time it is made: about 0.5 µs
// per closure, several per request in Framegate's code (node_modules are not recompiled). See the
// README's development section for what the build changed in bench:chat.
//
// One file, packages left as imports (resolved from node_modules beside it, so it must stay in
// the project), with a source map for stack traces (`node --enable-source-maps`). About 0.1 s,
// so every command that runs the api builds first and nothing stale is ever run.

export const builtApiEntry = path.join(projectRoot, 'dist/api/server.mjs');

/** The command line (after `node`) that runs the built api. */
export const builtApiArgs = ['--enable-source-maps', builtApiEntry];

/** Builds api/server.ts into dist/api/server.mjs. Written under a temporary name and renamed,
 * so a process starting while another command rebuilds never reads half a file. */
export async function buildApi(): Promise<string> {
  const result = await build({
    entryPoints: [path.join(projectRoot, 'api/server.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    sourcemap: 'linked',
    outfile: builtApiEntry,
    write: false,
    logLevel: 'warning',
  });
  mkdirSync(path.dirname(builtApiEntry), { recursive: true });
  const suffix = `.${process.pid}.tmp`;
  for (const file of result.outputFiles) writeFileSync(file.path + suffix, file.contents);
  // The map first: the bundle names it, so a bundle never points at a map that is not there yet.
  for (const file of [...result.outputFiles].sort((a, b) => Number(a.path.endsWith('.mjs')) - Number(b.path.endsWith('.mjs')))) {
    renameSync(file.path + suffix, file.path);
  }
  return builtApiEntry;
}
