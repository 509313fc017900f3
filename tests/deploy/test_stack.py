"""What the synthesized stack must contain: the job's arguments, storage protection,
the destinations, the schedule and the alarms. IAM is in test_least_privilege.py."""
from __future__ import annotations

import json
import re
import tomllib
import zipfile
from pathlib import Path

from cfn_template import as_list, logical_id, render
from node_required import require_node

from deploy.config import parse_config
from streaming.contracts import loader

from streaming.io import metrics
from streaming.runtime.glue_job import REQUIRED_ARGS, job_settings, kinesis_source_options

ACCOUNT_STREAM_ARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/lakehouse-dynamodb-cdc"
REPO = Path(__file__).resolve().parents[2]


def only(resources: dict[str, dict]) -> dict:
    assert len(resources) == 1, sorted(resources)
    return next(iter(resources.values()))


def resolved_job_arguments(arguments: dict) -> dict[str, str]:
    """The job's DefaultArguments as Glue would pass them after deploy: bucket and stream
    references replaced by plausible deployed values."""
    values = {}
    for name, value in arguments.items():
        text = render(value)
        text = re.sub(r"\$\{ChangeStream[0-9A-F]{8}\.Arn\}", ACCOUNT_STREAM_ARN, text)
        text = re.sub(r"\$\{LakeBucket[0-9A-F]{8}\}", "lakehouse-lake-bucket", text)
        values[name] = text
    return values


def test_synth_prints_the_stack_and_its_resource_counts(synthesized):
    first, *counts = synthesized.summary.splitlines()
    resources = synthesized.template["Resources"]
    assert first.startswith(f"{synthesized.config.prefix}: {len(resources)} resources (")
    printed = {line.split()[1]: int(line.split()[0]) for line in counts}
    assert sum(printed.values()) == len(resources)
    assert printed["AWS::S3::Bucket"] == 5
    assert printed["Custom::AWS"] == len(synthesized.config.dynamodb_tables)


def test_the_glue_job_is_a_glue_5_1_streaming_job_with_the_arguments_it_needs(synthesized):
    synthesized.assertions.has_resource_properties(
        "AWS::Glue::Job", {"GlueVersion": "5.1", "Command": {"Name": "gluestreaming", "PythonVersion": "3"}, "MaxRetries": 0}
    )
    job = only(synthesized.resources("AWS::Glue::Job"))["Properties"]
    assert job["Command"]["Name"] == "gluestreaming"
    assert render(job["Command"]["ScriptLocation"]).endswith(".py")
    assert job["WorkerType"] == synthesized.config.glue_worker_type
    assert job["NumberOfWorkers"] == synthesized.config.glue_number_of_workers
    # One writer per checkpoint: Glue refuses a second concurrent run.
    assert job["ExecutionProperty"]["MaxConcurrentRuns"] == 1
    arguments = job["DefaultArguments"]
    # Glue's own parameters (https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-etl-glue-arguments.html).
    assert arguments["--datalake-formats"] == "hudi"
    assert arguments["--enable-glue-datacatalog"] == "true"
    assert arguments["--conf"] == "spark.serializer=org.apache.spark.serializer.KryoSerializer"
    assert arguments["--enable-metrics"] == "true"
    # Glue 5.x logs every job in real time; the flag is for Glue 4.0 and earlier
    # (https://docs.aws.amazon.com/glue/latest/dg/monitor-continuous-logging-enable.html).
    assert "--enable-continuous-cloudwatch-log" not in arguments
    assert render(arguments["--extra-py-files"]).endswith(".zip")
    # Every parameter the script requires is there, except the one Glue sets itself.
    assert {f"--{name}" for name in REQUIRED_ARGS} - set(arguments) == {"--JOB_NAME"}
    for name, value in synthesized.config.job_arguments.items():
        assert arguments[f"--{name}"] == value


def test_the_job_script_accepts_the_deployed_arguments(synthesized):
    """The oracle is the job's own parser: what the stack passes must validate there."""
    arguments = only(synthesized.resources("AWS::Glue::Job"))["Properties"]["DefaultArguments"]
    resolved = {name[2:]: value for name, value in resolved_job_arguments(arguments).items()}
    settings = job_settings({**resolved, "JOB_NAME": synthesized.config.job_name})
    assert settings.stream_arn == ACCOUNT_STREAM_ARN
    assert settings.raw_base_path == "s3://lakehouse-lake-bucket/raw"
    assert settings.quarantine_root == "s3://lakehouse-lake-bucket"
    assert settings.checkpoint_location == f"s3://lakehouse-lake-bucket/checkpoints/{synthesized.config.job_name}/"
    assert settings.database == synthesized.config.raw_database
    assert settings.sync_mode == "hms"
    # Glue's own lag gauge stays on where Glue emits it; the lag alarm watches the job's
    # EventLagSeconds instead (test_alarms_watch_lag_liveness_quarantine_and_dbt).
    assert kinesis_source_options(settings)["emitConsumerLagMetrics"] == "true"


def test_the_job_installs_the_pyyaml_the_tests_run_with(synthesized):
    # The contract loader imports yaml; that Glue 5.1 provides PyYAML could not be
    # confirmed from "Python modules already provided in AWS Glue"
    # (https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-python-libraries.html),
    # so the job pins it with --additional-python-modules, as pyproject.toml does.
    arguments = only(synthesized.resources("AWS::Glue::Job"))["Properties"]["DefaultArguments"]
    pins = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (pyyaml,) = [pin for pin in pins if pin.startswith("PyYAML==")]
    assert arguments["--additional-python-modules"].split(",") == [pyyaml]


def test_the_dbt_image_is_built_for_codebuilds_x86_64(synthesized):
    # CodeBuild's LINUX_CONTAINER environments are x86_64
    # (https://docs.aws.amazon.com/codebuild/latest/userguide/build-env-ref-compute-types.html);
    # without a platform, Docker builds for the deploying machine (arm64 on many laptops).
    # The platform is the asset's, in the assets manifest beside the template.
    assets = json.loads(synthesized.template_path.with_name(
        synthesized.template_path.name.replace(".template.json", ".assets.json")).read_text())
    platforms = [image["source"].get("platform") for image in assets["dockerImages"].values()]
    assert platforms == ["linux/amd64"]
    for project in synthesized.resources("AWS::CodeBuild::Project").values():
        assert project["Properties"]["Environment"]["Type"] == "LINUX_CONTAINER"


def test_every_bucket_is_encrypted_private_and_tls_only(synthesized):
    synthesized.assertions.resource_count_is("AWS::S3::Bucket", 5)
    synthesized.assertions.all_resources_properties(
        "AWS::S3::Bucket",
        {"OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}},
    )
    buckets = synthesized.resources("AWS::S3::Bucket")
    policies = {render(p["Properties"]["Bucket"]): p["Properties"] for p in synthesized.resources("AWS::S3::BucketPolicy").values()}
    for lid, bucket in buckets.items():
        props = bucket["Properties"]
        (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        algorithm = rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"]
        if lid.startswith("AccessLogsBucket"):
            # S3 delivers server access logs only to SSE-S3 buckets.
            assert algorithm == "AES256"
        else:
            assert algorithm == "aws:kms", lid
            assert render(rule["ServerSideEncryptionByDefault"]["KMSMasterKeyID"]).startswith("${DataKey")
            assert props["LoggingConfiguration"]["DestinationBucketName"]["Ref"].startswith("AccessLogsBucket")
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }, lid
        assert props["VersioningConfiguration"]["Status"] == "Enabled"
        denies_plain_http = [
            statement
            for statement in policies["${%s}" % lid]["PolicyDocument"]["Statement"]
            if statement["Effect"] == "Deny" and statement.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        ]
        assert denies_plain_http, f"{lid} accepts requests without TLS"


def test_lifecycle_rules_expire_query_results_and_quarantine(synthesized):
    config = synthesized.config

    def rules(prefix: str) -> list[dict]:
        (bucket,) = [b for lid, b in synthesized.resources("AWS::S3::Bucket").items() if re.fullmatch(logical_id(prefix), lid)]
        return bucket["Properties"]["LifecycleConfiguration"]["Rules"]

    results = [rule for rule in rules("AthenaResultsBucket") if "ExpirationInDays" in rule]
    assert [(rule.get("Prefix"), rule["ExpirationInDays"]) for rule in results] == [
        (None, config.athena_results_retention_days)
    ]
    quarantine = [rule for rule in rules("LakeBucket") if "ExpirationInDays" in rule]
    assert [(rule["Prefix"], rule["ExpirationInDays"]) for rule in quarantine] == [
        ("quarantine/", config.quarantine_retention_days)
    ]
    # Raw data never expires: only old versions of overwritten objects do.
    for prefix in ("LakeBucket", "CuratedBucket"):
        assert all(rule["Status"] == "Enabled" for rule in rules(prefix))
        assert {rule["NoncurrentVersionExpiration"]["NoncurrentDays"] for rule in rules(prefix) if "NoncurrentVersionExpiration" in rule} == {
            config.noncurrent_version_retention_days
        }


def test_the_stream_is_on_demand_and_encrypted(synthesized):
    stream = only(synthesized.resources("AWS::Kinesis::Stream"))["Properties"]
    assert stream["StreamModeDetails"] == {"StreamMode": "ON_DEMAND"}
    assert stream["StreamEncryption"] == {"EncryptionType": "KMS", "KeyId": "alias/aws/kinesis"}
    assert stream["RetentionPeriodHours"] == synthesized.config.stream_retention_hours


def test_each_table_streams_to_the_stream_at_microsecond_precision(synthesized):
    destinations = synthesized.resources("Custom::AWS")
    calls = {}
    for resource in destinations.values():
        create = json.loads(render(resource["Properties"]["Create"]))
        update = json.loads(render(resource["Properties"]["Update"]))
        delete = json.loads(render(resource["Properties"]["Delete"]))
        assert create["action"] == "enableKinesisStreamingDestination"
        # On update the destination is enabled already: it is updated, not enabled again
        # (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateKinesisStreamingDestination.html).
        assert update["action"] == "updateKinesisStreamingDestination"
        assert update["parameters"] == {
            "TableName": create["parameters"]["TableName"],
            "StreamArn": create["parameters"]["StreamArn"],
            "UpdateKinesisStreamingConfiguration": {"ApproximateCreationDateTimePrecision": "MICROSECOND"},
        }
        assert update["physicalResourceId"] == create["physicalResourceId"]
        assert delete["action"] == "disableKinesisStreamingDestination"
        assert delete["parameters"] == {
            "TableName": create["parameters"]["TableName"],
            "StreamArn": create["parameters"]["StreamArn"],
        }
        calls[create["parameters"]["TableName"]] = create["parameters"]
    assert sorted(calls) == sorted(synthesized.config.dynamodb_tables)
    for parameters in calls.values():
        assert re.fullmatch(r"\$\{ChangeStream[0-9A-F]{8}\.Arn\}", parameters["StreamArn"])
        assert parameters["EnableKinesisStreamingConfiguration"] == {"ApproximateCreationDateTimePrecision": "MICROSECOND"}


def test_databases_and_workgroups(synthesized):
    config = synthesized.config
    names = {db["Properties"]["DatabaseInput"]["Name"] for db in synthesized.resources("AWS::Glue::Database").values()}
    assert names == {config.raw_database, config.athena_schema, *config.curated_schemas.values()}
    # Lake Formation grants are opt-in (test_config_variants.py turns them on).
    assert synthesized.resources("AWS::LakeFormation::PrincipalPermissions") == {}
    workgroups = {wg["Properties"]["Name"]: wg["Properties"]["WorkGroupConfiguration"] for wg in synthesized.resources("AWS::Athena::WorkGroup").values()}
    assert set(workgroups) == {f"{config.prefix}-dbt", f"{config.prefix}-analysts"}
    locations = set()
    for settings in workgroups.values():
        assert settings["EnforceWorkGroupConfiguration"] is True
        assert settings["BytesScannedCutoffPerQuery"] == config.athena_bytes_scanned_cutoff
        assert settings["EngineVersion"]["SelectedEngineVersion"] == "Athena engine version 3"
        result = settings["ResultConfiguration"]
        assert result["EncryptionConfiguration"]["EncryptionOption"] == "SSE_KMS"
        locations.add(render(result["OutputLocation"]))
    # dbt's results (which can show staging rows) and the analysts' are apart.
    assert len(locations) == 2


def test_the_job_is_started_and_restarted(synthesized):
    rules = synthesized.resources("AWS::Events::Rule")
    keeper_targets = [
        rule["Properties"] for rule in rules.values()
        if any(render(t["Arn"]).startswith("${JobKeeper") for t in rule["Properties"]["Targets"])
    ]
    prefix = synthesized.config.prefix
    # docs/deploy-aws.md names these rules: disabling them is how the job is stopped on purpose.
    assert sorted((rule["Name"], rule.get("ScheduleExpression")) for rule in keeper_targets) == [
        (f"{prefix}-job-keeper-on-failure", None),
        (f"{prefix}-job-keeper-schedule", "rate(5 minutes)"),
    ]
    (on_failure,) = [rule["EventPattern"] for rule in keeper_targets if "EventPattern" in rule]
    assert on_failure == {
        "source": ["aws.glue"],
        "detail-type": ["Glue Job State Change"],
        "detail": {"jobName": [synthesized.config.job_name], "state": ["FAILED", "TIMEOUT", "ERROR"]},
    }
    keeper = [f for lid, f in synthesized.resources("AWS::Lambda::Function").items() if lid.startswith("JobKeeper")]
    (function,) = keeper
    assert function["Properties"]["Handler"] == "glue_job_keeper.handler"
    assert function["Properties"]["Environment"]["Variables"] == {"JOB_NAME": synthesized.config.job_name}


def test_dbt_runs_on_schedule_with_the_athena_target_and_the_pii_secret(synthesized):
    config = synthesized.config
    projects = {render(p["Properties"]["Name"]): p["Properties"] for p in synthesized.resources("AWS::CodeBuild::Project").values()}
    assert set(projects) == {f"{config.prefix}-dbt-build", f"{config.prefix}-dbt-source-freshness"}
    commands = {}
    for name, project in projects.items():
        variables = {v["Name"]: v for v in project["Environment"]["EnvironmentVariables"]}
        assert variables["LAKEHOUSE_DBT_TARGET"]["Value"] == "athena"
        assert variables["LAKEHOUSE_RAW_DATABASE"]["Value"] == config.raw_database
        assert variables["LAKEHOUSE_ATHENA_SCHEMA"]["Value"] == config.athena_schema
        assert render(variables["LAKEHOUSE_ATHENA_WORK_GROUP"]["Value"]) == f"{config.prefix}-dbt"
        assert variables["LAKEHOUSE_PII_KEY"]["Type"] == "SECRETS_MANAGER"
        assert render(variables["LAKEHOUSE_PII_KEY"]["Value"]).startswith("${PiiKey")
        assert project["ConcurrentBuildLimit"] == 1
        buildspec = json.loads(project["Source"]["BuildSpec"])
        commands[name] = buildspec["phases"]["build"]["commands"][-1]
    assert commands == {
        f"{config.prefix}-dbt-build": (
            "python -m lakehouse_dbt.athena_pii_key && dbt build --exclude-resource-type unit_test"
        ),
        f"{config.prefix}-dbt-source-freshness": "dbt source freshness",
    }
    schedules = {
        render(rule["Properties"]["Targets"][0]["Arn"]): rule["Properties"]["ScheduleExpression"]
        for rule in synthesized.resources("AWS::Events::Rule").values()
        if render(rule["Properties"]["Targets"][0]["Arn"]).startswith("${Dbt")
    }
    assert sorted(schedules.values()) == sorted([config.dbt_build_schedule, config.dbt_freshness_schedule])


def test_a_deploy_of_ones_own_contracts_ships_them_alone_and_builds_no_sample_model(tmp_path, monkeypatch):
    own = tmp_path / "own-contracts"
    own.mkdir()
    (own / "shop.yml").write_text(
        "table: shop\nraw_table: shop_orders\nkey: {partition_key: order_id}\n"
        "attributes: {order_id: {column: order_id, type: S}}\n"
        "partitioning: {column: order_bucket, expression: 'substring(order_id, -1, 1)'}\n", encoding="utf-8")
    monkeypatch.setattr(loader, "own_contracts_folder", lambda: own)
    monkeypatch.delenv(loader.CONTRACTS_DIR_ENV, raising=False)

    require_node()
    from deploy.app import build_app

    app, stack = build_app(parse_config({"dynamodb_tables": ["shop"]}), outdir=str(tmp_path / "cdk.out"))
    template = json.loads(Path(app.synth().get_stack_by_name(stack.stack_name).template_full_path).read_text())

    commands = [json.loads(resource["Properties"]["Source"]["BuildSpec"])["phases"]["build"]["commands"][-1]
                for resource in template["Resources"].values() if resource["Type"] == "AWS::CodeBuild::Project"]
    assert len(commands) == 2 and all(command.endswith(" --vars '{lakehouse_samples: false}'") for command in commands)
    zipped = zipfile.ZipFile(tmp_path / "cdk.out" / "build" / "streaming.zip").namelist()
    assert [name for name in zipped if name.endswith(".yml") and "contracts/" in name] == ["streaming/contracts/shop.yml"]


def test_alarms_watch_lag_liveness_quarantine_unrouted_items_and_dbt(synthesized):
    config = synthesized.config
    alarms = {a["Properties"]["AlarmName"]: a["Properties"] for a in synthesized.resources("AWS::CloudWatch::Alarm").values()}
    metrics_by_alarm = {name: (a["Namespace"], a["MetricName"]) for name, a in alarms.items()}
    assert metrics_by_alarm == {
        f"{config.prefix}-ConsumerLag": (metrics.METRICS_NAMESPACE, metrics.EVENT_LAG_SECONDS),
        f"{config.prefix}-JobNotRunning": (metrics.METRICS_NAMESPACE, metrics.BATCHES_COMPLETED),
        f"{config.prefix}-QuarantineGrowth": (metrics.METRICS_NAMESPACE, metrics.RECORDS_QUARANTINED),
        f"{config.prefix}-UnroutedItems": (metrics.METRICS_NAMESPACE, metrics.RECORDS_UNROUTED),
        f"{config.prefix}-DbtBuildFailed": ("AWS/CodeBuild", "FailedBuilds"),
        f"{config.prefix}-SourceFreshnessFailed": ("AWS/CodeBuild", "FailedBuilds"),
    }
    for name, alarm in alarms.items():
        assert [render(action) for action in alarm["AlarmActions"]] == ["${%s}" % only_topic(synthesized)], name
    # Glue emits its streaming metrics from glueContext.forEachBatch; the job runs Spark's
    # foreachBatch (https://docs.aws.amazon.com/glue/latest/dg/glue-streaming-concepts.html),
    # so the lag alarm watches the lag the job publishes after each batch (streaming/io/metrics.py).
    lag = alarms[f"{config.prefix}-ConsumerLag"]
    assert lag["Threshold"] == config.consumer_lag_alarm_seconds
    assert lag["Statistic"] == "Maximum"
    assert lag["Dimensions"] == [{"Name": metrics.JOB_DIMENSION, "Value": config.job_name}]
    # A batch without events publishes no lag: silence is a quiet stream here, and a
    # stopped job is JobNotRunning's, which treats silence as breaching.
    assert lag["TreatMissingData"] == "notBreaching"
    not_running = alarms[f"{config.prefix}-JobNotRunning"]
    # A job that is not running publishes nothing: missing data must alarm.
    assert not_running["TreatMissingData"] == "breaching"
    assert not_running["ComparisonOperator"] == "LessThanThreshold"
    assert not_running["Dimensions"] == [{"Name": metrics.JOB_DIMENSION, "Value": config.job_name}]
    quarantine = alarms[f"{config.prefix}-QuarantineGrowth"]
    assert quarantine["Threshold"] == config.quarantined_records_alarm_per_hour
    assert quarantine["Dimensions"] == [{"Name": metrics.JOB_DIMENSION, "Value": config.job_name}]
    # The first change matching no entity alarms by default (the contract lacks a kind of item).
    unrouted = alarms[f"{config.prefix}-UnroutedItems"]
    assert (unrouted["Threshold"], unrouted["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert config.unrouted_records_alarm_per_hour == 0
    assert (unrouted["Statistic"], unrouted["Period"]) == ("Sum", 3600)
    assert unrouted["Dimensions"] == [{"Name": metrics.JOB_DIMENSION, "Value": config.job_name}]
    assert unrouted["TreatMissingData"] == "notBreaching"
    # A run that ends badly is also sent to the topic as it happens.
    state_rules = [
        r["Properties"] for r in synthesized.resources("AWS::Events::Rule").values()
        if any(render(t["Arn"]) == "${%s}" % only_topic(synthesized) for t in r["Properties"]["Targets"])
    ]
    assert [r["EventPattern"]["detail"]["state"] for r in state_rules] == [["FAILED", "TIMEOUT", "ERROR", "STOPPED"]]


def only_topic(synthesized) -> str:
    (topic_id,) = synthesized.resources("AWS::SNS::Topic")
    return topic_id


def test_the_alarm_topic_is_encrypted_with_a_key_alarms_may_use(synthesized):
    topic = synthesized.resources("AWS::SNS::Topic")[only_topic(synthesized)]["Properties"]
    assert render(topic["KmsMasterKeyId"]).startswith("${DataKey")
    key_policy = only(synthesized.resources("AWS::KMS::Key"))["Properties"]["KeyPolicy"]["Statement"]
    services = {render(s["Principal"]["Service"]) for s in key_policy if "Service" in s.get("Principal", {})}
    assert {"cloudwatch.amazonaws.com", "events.amazonaws.com"} <= services
    assert all(as_list(s["Action"]) != ["kms:*"] for s in key_policy if "Service" in s.get("Principal", {}))
