#!/usr/bin/env node
// The API report of every package entry point (issue 18): runs API Extractor once per entry of
// package.json "exports" (except ./package.json), with api-extractor.json as the base config, and writes
// etc/waypoint-durable.api.md for the root and etc/waypoint-durable-<subpath>.api.md for the others.
//   node scripts/api-report.js           check: fails when a report differs from the checked-in one
//   node scripts/api-report.js --local   update: rewrites the reports
// Needs `npm run build` first (it reads the .d.ts in dist/).
'use strict';
const { existsSync } = require('node:fs');
const { join } = require('node:path');
const { CompilerState, Extractor, ExtractorConfig } = require('@microsoft/api-extractor');

const root = join(__dirname, '..');
const localBuild = process.argv.includes('--local');
const pkg = require(join(root, 'package.json'));
const base = ExtractorConfig.loadFile(join(root, 'api-extractor.json'));

const entries = Object.entries(pkg.exports).filter(([, target]) => typeof target === 'object' && target.types);
for (const [subpath, target] of entries) {
  if (!existsSync(join(root, target.types))) {
    console.error(`api-report: ${target.types} (the types of '${subpath}') does not exist; run npm run build first`);
    process.exit(1);
  }
}
const failed = [];
let compilerState; // one TypeScript program for every entry point: the analysis is shared
for (const [subpath, target] of entries) {
  const suffix = subpath === '.' ? '' : '-' + subpath.slice(2).replace(/\//g, '-');
  const configObject = {
    ...base,
    mainEntryPointFilePath: '<projectFolder>/' + target.types.replace(/^\.\//, ''),
    apiReport: { ...base.apiReport, reportFileName: `<unscopedPackageName>${suffix}` },
  };
  const config = ExtractorConfig.prepare({
    configObject,
    configObjectFullPath: join(root, 'api-extractor.json'),
    packageJsonFullPath: join(root, 'package.json'),
  });
  compilerState ??= CompilerState.create(config, { additionalEntryPoints: entries.map(([, t]) => join(root, t.types)) });
  const result = Extractor.invoke(config, { localBuild, compilerState, showVerboseMessages: false });
  const name = `${pkg.name}${subpath === '.' ? '' : subpath.slice(1)}`;
  if (!result.succeeded) failed.push(name);
  else console.log(`api-report: ${name} ${result.apiReportChanged ? 'report updated' : 'unchanged'}`);
}
if (failed.length > 0) {
  console.error(
    `api-report: the public API of ${failed.join(', ')} differs from etc/ (or API Extractor reported a problem above).` +
      (localBuild ? '' : ' If the change is intended, run `npm run api:update` and commit the etc/*.api.md changes with it.'),
  );
  process.exit(1);
}
