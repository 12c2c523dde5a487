// Vercel AI SDK (Node): generateText with tools on @ai-sdk/openai's chat model, pointed at
// the scripted stub, traced by @ai-sdk/otel (VAI_TELEMETRY=otel: `OpenTelemetry`, the GenAI
// conventions; =legacy: `LegacyOpenTelemetry`, the ai.* attributes). Spans go through the
// Node OTel SDK's own OTLP/HTTP protobuf exporter to the generator's receiver, which writes
// them in the capture exporter's OTLP/JSON lines. `*-nocontent`: recordInputs/recordOutputs off.
import { parseArgs } from "node:util";
import { createOpenAI } from "@ai-sdk/openai";
import { LegacyOpenTelemetry, OpenTelemetry } from "@ai-sdk/otel";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { generateText, registerTelemetry, stepCountIs, tool } from "ai";
import { z } from "zod";

const { values: args } = parseArgs({
  options: { scenario: { type: "string" }, layout: { type: "string" }, out: { type: "string" } },
});
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": `vercel-ai-${args.layout}` }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: process.env.OTLP_TRACES_URL }))],
});
provider.register();
registerTelemetry(process.env.VAI_TELEMETRY === "legacy" ? new LegacyOpenTelemetry() : new OpenTelemetry());

const content = !args.scenario.endsWith("-nocontent");
const telemetry = (functionId) => ({ isEnabled: true, functionId, recordInputs: content, recordOutputs: content });
const openai = createOpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: "sk-offline-stub" });
const model = openai.chat("gpt-4o");
const instructions = (agent) => `You are a careful research assistant. [agent:${agent}]`;

const fetchPage = tool({
  description: "Fetch one page of a listing: each page is new.",
  inputSchema: z.object({ page: z.number().int() }),
  execute: async ({ page }) => `Page ${page}: items ${page * 10}..${page * 10 + 9}`,
});
const tools = {
  search: tool({
    description: "Search the web: the same query always gives the same answer.",
    inputSchema: z.object({ query: z.string() }),
    execute: async ({ query }) => `No results found for '${query}'.`,
  }),
  fetch_page: fetchPage,
  lookup: tool({
    description: "Look a key up in a backend that is down: always fails.",
    inputSchema: z.object({ key: z.string() }),
    execute: async ({ key }) => {
      throw new Error(`backend unavailable while looking up ${key}`);
    },
  }),
  research: tool({
    description: "Ask the researcher agent about a topic.",
    inputSchema: z.object({ topic: z.string() }),
    execute: async ({ topic }) => {
      const result = await generateText({
        model,
        system: instructions("researcher"),
        prompt: `Research ${topic}.`,
        tools: { fetch_page: fetchPage },
        stopWhen: stepCountIs(20),
        telemetry: telemetry("researcher"),
      });
      return result.text;
    },
  }),
};

await generateText({
  model,
  system: instructions("main"),
  prompt: `Please help with the '${args.scenario}' task.`,
  tools,
  stopWhen: stepCountIs(20),
  telemetry: telemetry("main"),
});
await provider.forceFlush();
await provider.shutdown();
