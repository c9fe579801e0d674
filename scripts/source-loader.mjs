/**
 * Runs the workspaces' TypeScript sources in plain Node, for the bins in a repository checkout
 * that has not been built yet (packages/node/bin/eventflow.js, gateway/bin/eventflow-gateway.js).
 * Importing this module registers the hooks below; they load `vite`, a devDependency of the
 * repository, so published packages never come here: they run their dist/.
 */
import { register } from 'node:module';

register('./source-loader-hooks.mjs', import.meta.url);
