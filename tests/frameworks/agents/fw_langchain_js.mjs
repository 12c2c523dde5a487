// LangChain.js (Node): langchain v1's createAgent on @langchain/openai's ChatOpenAI, pointed
// at the scripted stub, traced by OpenInference's LangChainInstrumentation (which patches
// @langchain/core's CallbackManager). Spans go through the Node OTel SDK's own OTLP/HTTP
// protobuf exporter to the generator's receiver, which writes them in the capture
// exporter's OTLP/JSON lines. `*-nocontent`: traceConfig {hideInputs, hideOutputs}. (The JS
// OpenInference reads OPENINFERENCE_HIDE_* only when a traceConfig is given: without one it
// takes its defaults, so the environment switch alone does not hide content.)
import { parseArgs } from "node:util";
import { LangChainInstrumentation } from "@arizeai/openinference-instrumentation-langchain";
import * as CallbackManagerModule from "@langchain/core/callbacks/manager";
import { ChatOpenAI } from "@langchain/openai";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { createAgent, tool } from "langchain";
import { z } from "zod";

const { values: args } = parseArgs({
  options: { scenario: { type: "string" }, layout: { type: "string" }, out: { type: "string" } },
});
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": `langchain-js-${args.layout}` }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: process.env.OTLP_TRACES_URL }))],
});
provider.register();
const content = !args.scenario.endsWith("-nocontent");
const traceConfig = content ? undefined : { hideInputs: true, hideOutputs: true };
new LangChainInstrumentation({ tracerProvider: provider, traceConfig }).manuallyInstrument(CallbackManagerModule);

const model = new ChatOpenAI({
  model: "gpt-4o",
  apiKey: "sk-offline-stub",
  configuration: { baseURL: process.env.OPENAI_BASE_URL },
});
const instructions = (agent) => `You are a careful research assistant. [agent:${agent}]`;

const fetchPage = tool(async ({ page }) => `Page ${page}: items ${page * 10}..${page * 10 + 9}`, {
  name: "fetch_page",
  description: "Fetch one page of a listing: each page is new.",
  schema: z.object({ page: z.number().int() }),
});
const researcher = createAgent({
  model,
  tools: [fetchPage],
  systemPrompt: instructions("researcher"),
  name: "researcher",
});
const tools = [
  tool(async ({ query }) => `No results found for '${query}'.`, {
    name: "search",
    description: "Search the web: the same query always gives the same answer.",
    schema: z.object({ query: z.string() }),
  }),
  fetchPage,
  tool(
    async ({ key }) => {
      throw new Error(`backend unavailable while looking up ${key}`);
    },
    {
      name: "lookup",
      description: "Look a key up in a backend that is down: always fails.",
      schema: z.object({ key: z.string() }),
    },
  ),
  tool(
    async ({ topic }) => {
      const result = await researcher.invoke({ messages: [{ role: "user", content: `Research ${topic}.` }] });
      return result.messages.at(-1).content;
    },
    {
      name: "research",
      description: "Ask the researcher agent about a topic.",
      schema: z.object({ topic: z.string() }),
    },
  ),
];

const agent = createAgent({ model, tools, systemPrompt: instructions("main"), name: "main" });
await agent.invoke(
  { messages: [{ role: "user", content: `Please help with the '${args.scenario}' task.` }] },
  { recursionLimit: 50 },
);
await provider.forceFlush();
await provider.shutdown();
