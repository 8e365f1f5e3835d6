/**
 * `waypoint-durable/http`: the web face of a Waypoint (issue 38, docs/http.md).
 *
 * @example
 * import { createHttpHandler, toNodeListener } from 'waypoint-durable/http';
 */
export { createHttpHandler, type HttpHandler } from './handler';
export { toNodeListener } from './node-listener';
export { createApprovalToken } from './approval-route';
export { HttpConfigError, HttpError } from './errors';
export {
  UNSAFE_ALLOW_ALL,
  type Authorize,
  type Authorization,
  type AuthorizeContext,
  type ClientView,
  type HttpAction,
  type HttpHandlerOptions,
  type HttpPipeline,
} from './options';
export type { HttpRunView } from './run-view';
export type { ApprovalLinkOptions } from '../core/step/approval-token';
