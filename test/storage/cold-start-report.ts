/*
 * Preloaded (`node --require`) into a process the cold-start test spawns, such as the CLI: on exit it
 * writes, as the last line of stderr, how many TypeORM modules the process loaded.
 */
process.on('exit', () => {
  const typeorm = Object.keys(require.cache).filter((file) => /[\\/]node_modules[\\/]typeorm[\\/]/.test(file)).length;
  process.stderr.write(`\n${JSON.stringify({ typeormModules: typeorm })}\n`);
});
