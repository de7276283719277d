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

/** The command line (after `node`) that runs a built api. */
export function apiRunArgs(entry: string): string[] {
  return ['--enable-source-maps', entry];
}

/** The command line (after `node`) that runs the api built from this tree. */
export const builtApiArgs = apiRunArgs(builtApiEntry);

export interface BuildApiOptions {
  /** The tree whose api/server.ts is built: the project itself unless another revision's
   * sources were unpacked elsewhere (bench/chat-ab.ts). */
  sourceRoot?: string;
  /** Where the bundle goes. It must lie inside the project: its package imports are resolved
   * from the node_modules folders above it. */
  outfile?: string;
}

/** Builds api/server.ts into dist/api/server.mjs (or `outfile`) and returns the bundle's path.
 * Written under a temporary name and renamed, so a process starting while another command
 * rebuilds never reads half a file. */
export async function buildApi(options: BuildApiOptions = {}): Promise<string> {
  const outfile = options.outfile ?? builtApiEntry;
  const result = await build({
    entryPoints: [path.join(options.sourceRoot ?? projectRoot, 'api/server.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    sourcemap: 'linked',
    outfile,
    write: false,
    logLevel: 'warning',
  });
  mkdirSync(path.dirname(outfile), { recursive: true });
  const suffix = `.${process.pid}.tmp`;
  for (const file of result.outputFiles) writeFileSync(file.path + suffix, file.contents);
  // The map first: the bundle names it, so a bundle never points at a map that is not there yet.
  for (const file of [...result.outputFiles].sort((a, b) => Number(a.path.endsWith('.mjs')) - Number(b.path.endsWith('.mjs')))) {
    renameSync(file.path + suffix, file.path);
  }
  return outfile;
}
