"""The lakehouse on AWS in one stack: stream, raw and curated storage, the Glue streaming
job, scheduled dbt, least-privilege roles and alarms.

One stack because every part refers to the others (the job's role names the buckets,
the alarms name the job and the dbt projects); splitting it would only add exports.
Each part is a module of deploy/stacks/parts/, which says why they are functions that
create their resources in this stack rather than constructs of their own.
"""
from __future__ import annotations

from pathlib import Path

from aws_cdk import Stack
from constructs import Construct

from deploy.config import DeployConfig
from deploy.stacks.parts.alarms import add_alarms
from deploy.stacks.parts.analyst_access import add_analyst_access
from deploy.stacks.parts.catalog import add_catalog
from deploy.stacks.parts.change_stream import add_change_stream
from deploy.stacks.parts.dbt_schedule import add_dbt_schedule
from deploy.stacks.parts.job_keeper import add_job_keeper
from deploy.stacks.parts.lake_formation import add_lake_formation_grants
from deploy.stacks.parts.storage import add_storage
from deploy.stacks.parts.streaming_job import add_streaming_job
from streaming.contracts.loader import ContractSet


class LakehouseStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig, contracts: ContractSet,
                 build_dir: Path, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # The order is the template's: the data key's policy lists its statements in the
        # order the parts add them (storage, dbt's secret, alarms), and the CDKMetadata
        # that the CDK CLI adds lists construct types in the order they first appear.
        storage = add_storage(self, config)
        catalog = add_catalog(self, config, storage)
        stream = add_change_stream(self, config, storage)
        job = add_streaming_job(self, config, storage, catalog.databases[config.raw_database], stream, contracts,
                                build_dir)
        add_job_keeper(self, config, storage, job)
        dbt = add_dbt_schedule(self, config, storage, catalog.dbt_workgroup, contracts)
        analyst_role = add_analyst_access(self, config, storage, catalog.analyst_workgroup)
        if config.lake_formation_grants:
            add_lake_formation_grants(self, config, catalog, job.role, dbt.role, analyst_role)
        add_alarms(self, config, storage, job, dbt)
