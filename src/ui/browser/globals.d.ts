// The page's scripts are classic scripts sharing one scope (src/ui/page-assets.ts wraps them in one
// IIFE), so they cannot import; the API shapes reach them as global aliases of ./api.
type RunStatus = import('./api').RunStatus;
type ErrorJson = import('./api').ErrorJson;
type ProgressJson = import('./api').ProgressJson;
type RunSummaryJson = import('./api').RunSummaryJson;
type RunListJson = import('./api').RunListJson;
type AiUsageJson = import('./api').AiUsageJson;
type StepJson = import('./api').StepJson;
type IntegrityJson = import('./api').IntegrityJson;
type ResumePointJson = import('./api').ResumePointJson;
type SystemRowJson = import('./api').SystemRowJson;
type RunDetailJson = import('./api').RunDetailJson;
type CheckpointJson = import('./api').CheckpointJson;
type ResumeJson = import('./api').ResumeJson;
type RunInfoJson = import('./api').RunInfoJson;
type FlowJson = import('./api').FlowJson;
type FlowNodeJson = import('./api').FlowNodeJson;
type FlowStepJson = import('./api').FlowStepJson;
type ParallelJson = import('./api').ParallelJson;
type ForEachJson = import('./api').ForEachJson;
type ChildRunJson = import('./api').ChildRunJson;
