// A user's jest setup for Waypoint: @swc/jest compiles the tests with decorator metadata; inversify 8 is
// an ES module, so it is compiled to CommonJS too. waypoint-durable resolves to this repository's build.
const swc = [
  '@swc/jest',
  { jsc: { parser: { syntax: 'typescript', decorators: true }, transform: { legacyDecorator: true, decoratorMetadata: true } }, module: { type: 'commonjs' } },
];

module.exports = {
  rootDir: __dirname,
  testMatch: ['<rootDir>/*.jest.ts'],
  testEnvironment: 'node',
  transform: { '^.+\\.(t|j|mj)s$': swc },
  transformIgnorePatterns: ['/node_modules/(?!(inversify|@inversifyjs)/)'],
  moduleNameMapper: {
    '^waypoint-durable/testing$': '<rootDir>/../../dist/src/testing/index.js',
    '^waypoint-durable$': '<rootDir>/../../dist/src/index.js',
  },
};
