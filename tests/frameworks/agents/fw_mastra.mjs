// Mastra (Node): an @mastra/core Agent on an OpenAI-compatible model config pointed at the
// scripted stub, traced by Mastra's own observability (@mastra/observability) with the
// OtelExporter of @mastra/otel-exporter, whose "custom" provider sends OTLP/HTTP protobuf to
// the generator's receiver, which writes the capture exporter's OTLP/JSON lines.
// `*-nocontent`: tracingOptions {hideInput, hideOutput}, Mastra's own content switch.
import { parseArgs } from "node:util";
import { Agent } from "@mastra/core/agent";
import { Mastra } from "@mastra/core/mastra";
import { createTool } from "@mastra/core/tools";
import { Observability } from "@mastra/observability";
import { OtelExporter } from "@mastra/otel-exporter";
import { z } from "zod";

const { values: args } = parseArgs({
  options: { scenario: { type: "string" }, layout: { type: "string" }, out: { type: "string" } },
});
const content = !args.scenario.endsWith("-nocontent");
const tracingOptions = content ? {} : { hideInput: true, hideOutput: true };
const model = { id: "openai/gpt-4o", url: process.env.OPENAI_BASE_URL, apiKey: "sk-offline-stub" };
const instructions = (agent) => `You are a careful research assistant. [agent:${agent}]`;

const fetchPage = createTool({
  id: "fetch_page",
  description: "Fetch one page of a listing: each page is new.",
  inputSchema: z.object({ page: z.number().int() }),
  execute: async ({ page }) => `Page ${page}: items ${page * 10}..${page * 10 + 9}`,
});
const researcher = new Agent({
  id: "researcher",
  name: "researcher",
  instructions: instructions("researcher"),
  model,
  tools: { fetch_page: fetchPage },
});
const tools = {
  search: createTool({
    id: "search",
    description: "Search the web: the same query always gives the same answer.",
    inputSchema: z.object({ query: z.string() }),
    execute: async ({ query }) => `No results found for '${query}'.`,
  }),
  fetch_page: fetchPage,
  lookup: createTool({
    id: "lookup",
    description: "Look a key up in a backend that is down: always fails.",
    inputSchema: z.object({ key: z.string() }),
    execute: async ({ key }) => {
      throw new Error(`backend unavailable while looking up ${key}`);
    },
  }),
  research: createTool({
    id: "research",
    description: "Ask the researcher agent about a topic.",
    inputSchema: z.object({ topic: z.string() }),
    execute: async ({ topic }, context) => {
      const result = await mastra.getAgent("researcher").generate(`Research ${topic}.`, {
        maxSteps: 20,
        tracingContext: context?.tracingContext,
        tracingOptions,
      });
      return result.text;
    },
  }),
};
const main = new Agent({ id: "main", name: "main", instructions: instructions("main"), model, tools });

const exporter = new OtelExporter({
  provider: { custom: { endpoint: process.env.OTLP_TRACES_URL, protocol: "http/protobuf" } },
});
const mastra = new Mastra({
  agents: { main, researcher },
  logger: false,
  observability: new Observability({
    configs: { otel: { serviceName: `mastra-${args.layout}`, exporters: [exporter] } },
  }),
});

await mastra.getAgent("main").generate(`Please help with the '${args.scenario}' task.`, {
  maxSteps: 20,
  tracingOptions,
});
await mastra.observability?.shutdown?.();
await exporter.shutdown();
