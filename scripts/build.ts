import path from 'node:path';
import { buildApi } from './lib/build-api.ts';
import { projectRoot } from './lib/engines.ts';

// `npm run build`: the api process as production runs it (see scripts/lib/build-api.ts).
const entry = await buildApi();
console.log(`built ${path.relative(projectRoot, entry)}; run it with: node --enable-source-maps ${path.relative(projectRoot, entry)}`);
