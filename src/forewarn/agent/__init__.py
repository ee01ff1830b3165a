"""The handler agent: a daemon that prepares for, approves and recovers from scheduled events.

monitor (:class:`PollLoop`, on :class:`forewarn.client.Client`) -> change
(:class:`~forewarn.client.DocumentChange`) -> store (:class:`HandledStore`, dedupe by EventId)
-> policies (:class:`Policy`) -> hooks (:class:`HookRunner`) and approval, elected among the
VMs in Resources. ``forewarn agent`` runs it; ``docs/agent.md`` describes it.
"""

from __future__ import annotations

from forewarn.agent.config import (
    DOCUMENTED_SAMPLE_POLICY,
    AgentConfig,
    AgentConfigError,
    load_config,
)
from forewarn.agent.daemon import Agent, PollLoop, build_agent
from forewarn.agent.hooks import HookRunner, Moment
from forewarn.agent.leader import leader, may_approve
from forewarn.agent.pipeline import InlineExecutor, Pipeline
from forewarn.agent.policies import Action, Decision, Policy, Rule
from forewarn.agent.store import AgentStateError, HandledStore, Outcome, Step

__all__ = [
    "DOCUMENTED_SAMPLE_POLICY",
    "Action",
    "Agent",
    "AgentConfig",
    "AgentConfigError",
    "AgentStateError",
    "Decision",
    "HandledStore",
    "HookRunner",
    "InlineExecutor",
    "Moment",
    "Outcome",
    "Pipeline",
    "Policy",
    "PollLoop",
    "Rule",
    "Step",
    "build_agent",
    "leader",
    "load_config",
    "may_approve",
]
