// The page's scripts are classic scripts sharing one scope (src/ui/page-assets.ts wraps them in one
// IIFE), so they cannot import; the API's types reach them as global aliases of ../api-types, the one
// module where the server's views are defined.
type RunStatus = import('../api-types').RunStatus;
type AiUsage = import('../api-types').AiUsage;
type ErrorView = import('../api-types').ErrorView;
type ProgressView = import('../api-types').ProgressView;
type RunSummaryView = import('../api-types').RunSummaryView;
type RunListView = import('../api-types').RunListView;
type StepView = import('../api-types').StepView;
type IntegrityView = import('../api-types').IntegrityView;
type ResumePointView = import('../api-types').ResumePointView;
type SystemRowView = import('../api-types').SystemRowView;
type RunDetailView = import('../api-types').RunDetailView;
/** `GET /api/runs/:id/checkpoints/:sequence`, with the checkpoint as the page reads its JSON. */
type CheckpointView = import('../api-types').CheckpointViewOf<import('../api-types').CheckpointJson>;
type ResumeView = import('../api-types').ResumeView;
type RunInfoView = import('../api-types').RunInfoView;
type FlowView = import('../api-types').FlowView;
type FlowNodeView = import('../api-types').FlowNodeView;
type FlowStepNodeView = import('../api-types').FlowStepNodeView;
type ParallelView = import('../api-types').ParallelView;
type ForEachView = import('../api-types').ForEachView;
type ChildRunView = import('../api-types').ChildRunView;
type StreamEventView = import('../api-types').StreamEventView;
type LoopView = import('../api-types').LoopView;
type StepsPageView = import('../api-types').StepsPageView;
