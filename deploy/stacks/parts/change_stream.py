"""The Kinesis stream the DynamoDB tables' changes flow into, and the custom resources
that turn on each table's Kinesis streaming destination."""
from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr

from deploy.config import DeployConfig
from deploy.stacks.parts.storage import Storage


def add_change_stream(stack: Stack, config: DeployConfig, storage: Storage) -> kinesis.Stream:
    stream = kinesis.Stream(
        stack,
        "ChangeStream",
        stream_name=f"{config.prefix}-dynamodb-cdc",
        stream_mode=kinesis.StreamMode.ON_DEMAND if config.stream_on_demand else kinesis.StreamMode.PROVISIONED,
        shard_count=None if config.stream_on_demand else config.stream_shard_count,
        # The AWS managed key (aws/kinesis) needs no key policy for DynamoDB's writes;
        # a customer managed key would need grants for DynamoDB's replication, which
        # cannot be verified offline.
        encryption=kinesis.StreamEncryption.MANAGED,
        retention_period=Duration.hours(config.stream_retention_hours),
    )
    # The custom resources below share one provider function: its role and log group
    # are made here, so it gets only its log group, not the managed
    # AWSLambdaBasicExecutionRole (logs on every resource).
    log_group = storage.log_group(stack, "KinesisDestinationLogs", logs.RetentionDays.ONE_MONTH)
    role = iam.Role(
        stack,
        "KinesisDestinationRole",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description="Turns the DynamoDB tables' Kinesis streaming destination on and off",
    )
    role.add_to_policy(
        iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn])
    )
    for table in config.dynamodb_tables:
        _add_kinesis_destination(stack, table, stream, role, log_group)
    return stream


def _add_kinesis_destination(
    stack: Stack, table: str, stream: kinesis.Stream, role: iam.Role, log_group: logs.LogGroup
) -> None:
    """Streams an existing table's changes into the stream at microsecond precision.

    AWS::DynamoDB::Table's KinesisStreamSpecification covers tables CloudFormation
    creates; these tables exist already, so a custom resource calls the API
    (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_EnableKinesisStreamingDestination.html).
    """
    table_arn = stack.format_arn(service="dynamodb", resource="table", resource_name=table)
    destination = {"TableName": table, "StreamArn": stream.stream_arn}
    precision = {"ApproximateCreationDateTimePrecision": "MICROSECOND"}
    # The stream's name comes from the prefix, which also names the stack, so within
    # a stack the stream ARN (and this physical id) never changes.
    physical_id = cr.PhysicalResourceId.of(f"{table}|{stream.stream_arn}")
    # Permissions the DynamoDB developer guide lists for enabling and disabling
    # (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/kds_iam.html).
    cr.AwsCustomResource(
        stack,
        f"KinesisDestination-{table}",
        on_create=cr.AwsSdkCall(
            service="DynamoDB",
            action="enableKinesisStreamingDestination",
            parameters={**destination, "EnableKinesisStreamingConfiguration": precision},
            physical_resource_id=physical_id,
        ),
        # An update runs on a destination that is already enabled, where Enable would
        # fail; Update sets the configuration of the existing one
        # (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateKinesisStreamingDestination.html).
        on_update=cr.AwsSdkCall(
            service="DynamoDB",
            action="updateKinesisStreamingDestination",
            parameters={**destination, "UpdateKinesisStreamingConfiguration": precision},
            physical_resource_id=physical_id,
        ),
        on_delete=cr.AwsSdkCall(service="DynamoDB", action="disableKinesisStreamingDestination", parameters=destination),
        policy=cr.AwsCustomResourcePolicy.from_statements(
            [
                iam.PolicyStatement(
                    actions=[
                        "dynamodb:EnableKinesisStreamingDestination",
                        "dynamodb:UpdateKinesisStreamingDestination",
                        "dynamodb:DisableKinesisStreamingDestination",
                        "dynamodb:DescribeKinesisStreamingDestination",
                    ],
                    resources=[table_arn],
                ),
                iam.PolicyStatement(
                    actions=["kinesis:PutRecords", "kinesis:DescribeStream", "kinesis:DescribeStreamSummary"],
                    resources=[stream.stream_arn],
                ),
                # ListStreams has no resource type in IAM: "*" is the only resource it takes
                # (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonkinesis.html).
                iam.PolicyStatement(actions=["kinesis:ListStreams"], resources=["*"]),
                # The first destination creates DynamoDB's service-linked replication role.
                iam.PolicyStatement(
                    actions=["iam:CreateServiceLinkedRole"],
                    resources=[
                        stack.format_arn(
                            service="iam",
                            region="",
                            resource="role",
                            resource_name="aws-service-role/kinesisreplication.dynamodb.amazonaws.com/*",
                        )
                    ],
                    conditions={"StringEquals": {"iam:AWSServiceName": "kinesisreplication.dynamodb.amazonaws.com"}},
                ),
            ]
        ),
        install_latest_aws_sdk=False,
        role=role,
        log_group=log_group,
        timeout=Duration.minutes(2),
    )
