"""Search: an OpenSearch Service domain in a VPC built here, or an OpenSearch Serverless vector
collection (context flag `evidence:search`), plus the custom resource that creates the index
template and search pipelines through the adapter."""

from __future__ import annotations

import json
import re

from aws_cdk import CfnResource, CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchserverless as aoss
from aws_cdk import aws_opensearchservice as opensearch
from constructs import Construct

from evidence.search.opensearch_bodies import AUTO_CREATE_INDEX

from .settings import InfraSettings, SearchKind

#: HTTP verbs on the domain. Readers search (GET/POST/HEAD); writers also index and delete.
ES_READ_ACTIONS = ["es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPost"]
ES_WRITE_ACTIONS = [*ES_READ_ACTIONS, "es:ESHttpPut", "es:ESHttpDelete", "es:ESHttpPatch"]


class Search(Construct):
    """Exposes `endpoint`, `service` (es|aoss), `hybrid_mode`, and for the domain `vpc` + `client_sg`."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        settings: InfraSettings,
        key: kms.IKey,
        removal: RemovalPolicy = RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
    ) -> None:
        super().__init__(scope, id)
        self.settings = settings
        self.key = key
        self.removal = removal
        self.vpc: ec2.IVpc | None = None
        self.client_sg: ec2.ISecurityGroup | None = None
        self.domain: opensearch.Domain | None = None
        self.collection: aoss.CfnCollection | None = None
        self._writers: list[iam.IRole] = []
        self._readers: list[iam.IRole] = []
        # The setup function's role is the domain's master user (fine-grained access control):
        # it maps the functions' roles to OpenSearch roles, so it exists before the domain.
        self.setup_role = iam.Role(
            self,
            "SetupRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="evidence search setup custom resource",
        )
        if settings.search is SearchKind.DOMAIN:
            self._build_domain()
        else:
            self._build_collection()

    # -- domain ---------------------------------------------------------------------------------
    def _build_domain(self) -> None:
        s = self.settings
        flow_logs = logs.LogGroup(
            self, "FlowLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY
        )
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            # One NAT gateway: Lambdas in the VPC still reach Bedrock, Cohere and the CloudFormation
            # response URL. A second one buys AZ-independent egress at twice the cost.
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(
                    name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=22
                ),
            ],
            gateway_endpoints={
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)
            },
            flow_logs={
                "all": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
                    traffic_type=ec2.FlowLogTrafficType.ALL,
                )
            },
        )
        self.client_sg = ec2.SecurityGroup(
            self,
            "ClientSg",
            vpc=self.vpc,
            allow_all_outbound=True,
            description="evidence Lambdas that talk to OpenSearch",
        )
        domain_sg = ec2.SecurityGroup(
            self,
            "DomainSg",
            vpc=self.vpc,
            allow_all_outbound=False,
            description="evidence OpenSearch domain: HTTPS from the evidence Lambdas only",
        )
        domain_sg.add_ingress_rule(self.client_sg, ec2.Port.tcp(443), "HTTPS from evidence Lambdas")
        log_groups = {
            name: logs.LogGroup(
                self,
                f"Domain{name}Logs",
                retention=logs.RetentionDays.ONE_MONTH,
                removal_policy=RemovalPolicy.DESTROY,
            )
            for name in ("App", "SlowSearch", "SlowIndex", "Audit")
        }
        self.domain = opensearch.Domain(
            self,
            "Domain",
            version=opensearch.EngineVersion.OPENSEARCH_2_19,
            vpc=self.vpc,
            vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
            security_groups=[domain_sg],
            capacity=opensearch.CapacityConfig(
                data_nodes=s.opensearch_data_nodes,
                data_node_instance_type=s.opensearch_instance_type,
                master_nodes=3,
                master_node_instance_type=s.opensearch_master_instance_type,
                multi_az_with_standby_enabled=False,
            ),
            ebs=opensearch.EbsOptions(
                volume_size=s.opensearch_volume_gb, volume_type=ec2.EbsDeviceVolumeType.GP3
            ),
            zone_awareness=opensearch.ZoneAwarenessConfig(enabled=True, availability_zone_count=2),
            encryption_at_rest=opensearch.EncryptionAtRestOptions(enabled=True, kms_key=self.key),
            node_to_node_encryption=True,
            enforce_https=True,
            tls_security_policy=opensearch.TLSSecurityPolicy.TLS_1_2_PFS,
            fine_grained_access_control=opensearch.AdvancedSecurityOptions(
                master_user_arn=self.setup_role.role_arn
            ),
            logging=opensearch.LoggingOptions(
                app_log_enabled=True,
                app_log_group=log_groups["App"],
                slow_search_log_enabled=True,
                slow_search_log_group=log_groups["SlowSearch"],
                slow_index_log_enabled=True,
                slow_index_log_group=log_groups["SlowIndex"],
                audit_log_enabled=True,
                audit_log_group=log_groups["Audit"],
            ),
            removal_policy=self.removal,
        )
        self.domain.grant_read_write(self.setup_role)
        if self.removal is not RemovalPolicy.DESTROY:
            # A retained domain keeps its network interfaces in the private subnets and its security
            # group: deleting those would fail the stack deletion, so they are retained with it.
            holders = [self.vpc.node.default_child, domain_sg.node.default_child]
            holders += [subnet.node.default_child for subnet in self.vpc.private_subnets]
            for holder in holders:
                assert isinstance(holder, CfnResource)
                holder.apply_removal_policy(self.removal)

    # -- serverless ------------------------------------------------------------------------------
    @property
    def collection_name(self) -> str:
        # Collection and policy names are unique per account and region: derived from the stack.
        # Collections: 3-32 characters, lower case letters, digits and '-'; policies add "-data".
        name = re.sub(r"[^a-z0-9-]", "-", Stack.of(self).stack_name.lower()).strip("-")
        return (name if name[:1].isalpha() else f"e-{name}")[:27].rstrip("-")

    def _build_collection(self) -> None:
        name = self.collection_name
        collection_rule = {"ResourceType": "collection", "Resource": [f"collection/{name}"]}
        # A customer-managed key, not AWSOwnedKey: key rotation and revocation stay with the account.
        encryption = aoss.CfnSecurityPolicy(
            self,
            "EncryptionPolicy",
            name=f"{name}-enc",
            type="encryption",
            policy=Stack.of(self).to_json_string(
                {"Rules": [collection_rule], "AWSOwnedKey": False, "KmsARN": self.key.key_arn}
            ),
        )
        # Public endpoint, but every request is SigV4-signed and checked against the data access
        # policy below; a VPC endpoint is the upgrade when the functions move into a VPC.
        network = aoss.CfnSecurityPolicy(
            self,
            "NetworkPolicy",
            name=f"{name}-net",
            type="network",
            policy=json.dumps([{"Rules": [collection_rule], "AllowFromPublic": True}]),
        )
        self.collection = aoss.CfnCollection(
            self,
            "Collection",
            name=name,
            type="VECTORSEARCH",
            standby_replicas="ENABLED",
            description="evidence vector collection",
        )
        self.collection.add_resource_dependency(encryption)
        self.collection.add_resource_dependency(network)
        self.collection.apply_removal_policy(self.removal)

    # -- shared ----------------------------------------------------------------------------------
    @property
    def service(self) -> str:
        return "es" if self.domain is not None else "aoss"

    @property
    def hybrid_mode(self) -> str:
        # Serverless has no search pipelines with RRF: fuse the legs in the ranking layer.
        return "server" if self.domain is not None else "client"

    @property
    def endpoint(self) -> str:
        if self.domain is not None:
            return f"https://{self.domain.domain_endpoint}"
        assert self.collection is not None
        return self.collection.attr_collection_endpoint

    def placement(
        self, *, in_vpc: bool
    ) -> tuple[ec2.IVpc | None, list[ec2.ISecurityGroup] | None, ec2.SubnetSelection | None]:
        """Where a function that talks to the domain runs: private subnets, the client security group."""
        if not in_vpc or self.vpc is None or self.client_sg is None:
            return None, None, None
        return (
            self.vpc,
            [self.client_sg],
            ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
        )

    def grant(self, role: iam.IRole, *, write: bool) -> None:
        (self._writers if write else self._readers).append(role)
        if self.domain is not None:
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=ES_WRITE_ACTIONS if write else ES_READ_ACTIONS,
                    resources=[self.domain.domain_arn, f"{self.domain.domain_arn}/*"],
                )
            )
        else:
            assert self.collection is not None
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["aoss:APIAccessAll"],
                    resources=[self.collection.attr_arn],
                )
            )

    def add_setup(
        self,
        *,
        layer: lambda_.ILayerVersion,
        code: lambda_.Code,
        runtime: lambda_.Runtime,
        version: str,
    ) -> lambda_.Function:
        """The custom resource that creates the index template, the search pipelines and (domain)
        the fine-grained role mappings. Call after every `grant`."""
        log_group = logs.LogGroup(
            self, "SetupLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY
        )
        log_group.grant_write(self.setup_role)
        if self.vpc is not None:
            add_vpc_access(self.setup_role)
        else:
            self.grant(self.setup_role, write=True)
            self._writers.remove(self.setup_role)
        vpc, security_groups, subnets = self.placement(in_vpc=True)
        fn = lambda_.Function(
            self,
            "SetupFunction",
            runtime=runtime,
            architecture=lambda_.Architecture.X86_64,
            code=code,
            handler="search_setup.on_event",
            layers=[layer],
            role=self.setup_role,
            log_group=log_group,
            timeout=Duration.minutes(5),
            memory_size=512,
            environment={"POWERTOOLS_SERVICE_NAME": "evidence-search-setup", "LOG_LEVEL": "INFO"},
            description="evidence: index template, search pipelines, role mappings",
            vpc=vpc,
            security_groups=security_groups,
            vpc_subnets=subnets,
        )
        data_policy = self._data_access_policy() if self.collection is not None else None
        writers = [r.role_arn for r in self._writers]
        readers = [r.role_arn for r in self._readers]
        resource = CustomResource(
            self,
            "Setup",
            service_token=fn.function_arn,
            resource_type="Custom::EvidenceSearchSetup",
            properties={
                "Endpoint": self.endpoint,
                "Service": self.service,
                "Region": Stack.of(self).region,
                "Dimension": str(self.settings.embed_dimension),
                "HybridMode": self.hybrid_mode,
                "WriterRoles": writers,
                "ReaderRoles": readers,
                "Version": version,
                # Domain only (Serverless has no cluster settings): no write may create an
                # evidence index implicitly (docs/opensearch.md#no-implicit-index-creation).
                **({"AutoCreateIndex": AUTO_CREATE_INDEX} if self.service == "es" else {}),
            },
        )
        # The endpoint reference already orders it after the domain/collection; on Serverless the
        # data access policy must exist too, or the setup's first request is refused.
        if data_policy is not None:
            resource.node.add_dependency(data_policy)
        return fn

    def _data_access_policy(self) -> aoss.CfnAccessPolicy:
        name = self.collection_name
        writers = [*[r.role_arn for r in self._writers], self.setup_role.role_arn]
        rules: list[dict[str, object]] = [
            {
                "Rules": [
                    {
                        "ResourceType": "collection",
                        "Resource": [f"collection/{name}"],
                        "Permission": [
                            "aoss:DescribeCollectionItems",
                            "aoss:CreateCollectionItems",
                            "aoss:UpdateCollectionItems",
                        ],
                    },
                    {
                        "ResourceType": "index",
                        "Resource": [f"index/{name}/*"],
                        "Permission": [
                            "aoss:CreateIndex",
                            "aoss:DescribeIndex",
                            "aoss:UpdateIndex",
                            "aoss:ReadDocument",
                            "aoss:WriteDocument",
                        ],
                    },
                ],
                "Principal": writers,
            }
        ]
        if self._readers:
            rules.append(
                {
                    "Rules": [
                        {
                            "ResourceType": "index",
                            "Resource": [f"index/{name}/*"],
                            "Permission": ["aoss:DescribeIndex", "aoss:ReadDocument"],
                        }
                    ],
                    "Principal": [r.role_arn for r in self._readers],
                }
            )
        return aoss.CfnAccessPolicy(
            self,
            "DataAccessPolicy",
            name=f"{name}-data",
            type="data",
            policy=Stack.of(self).to_json_string(rules),
        )


def add_vpc_access(role: iam.IRole) -> None:
    """What AWSLambdaVPCAccessExecutionRole grants, inline: ENI management has no resource scoping."""
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=[
                "ec2:CreateNetworkInterface",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DeleteNetworkInterface",
                "ec2:AssignPrivateIpAddresses",
                "ec2:UnassignPrivateIpAddresses",
            ],
            resources=["*"],
        )
    )
