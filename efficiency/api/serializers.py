from rest_framework import serializers

from efficiency.models import Department, Gpu, Job, Node, SourceRun


class DepartmentSerializer(serializers.ModelSerializer):
    node_count = serializers.IntegerField(read_only=True)
    gpu_count = serializers.IntegerField(read_only=True)
    running_job_count = serializers.IntegerField(read_only=True)
    running_gpu_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Department
        fields = [
            "id",
            "code",
            "name",
            "is_active",
            "node_count",
            "gpu_count",
            "running_job_count",
            "running_gpu_count",
        ]


class GpuSerializer(serializers.ModelSerializer):
    class Meta:
        model = Gpu
        fields = ["index", "uuid", "model", "memory_mib"]


class NodeSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    owner_department = serializers.SlugRelatedField(slug_field="code", read_only=True)

    class Meta:
        model = Node
        fields = [
            "id",
            "cluster",
            "hostname",
            "gpu_model",
            "gpu_count",
            "rdma_capable",
            "fault_domain",
            "state",
            "state_reason",
            "owner_department",
        ]


class NodeDetailSerializer(NodeSerializer):
    gpus = GpuSerializer(many=True, read_only=True)

    class Meta(NodeSerializer.Meta):
        fields = [*NodeSerializer.Meta.fields, "gpus"]


class JobSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    department = serializers.SlugRelatedField(slug_field="code", read_only=True)
    wait_s = serializers.FloatField(read_only=True)
    duration_s = serializers.FloatField(read_only=True)
    gpu_hours = serializers.FloatField(read_only=True)

    class Meta:
        model = Job
        fields = [
            "id",
            "cluster",
            "source",
            "external_id",
            "department",
            "account",
            "user_name",
            "name",
            "state",
            "gpu_count",
            "gpu_model",
            "node_count",
            "submitted_at",
            "started_at",
            "ended_at",
            "wait_s",
            "duration_s",
            "gpu_hours",
            "framework",
        ]


class JobDetailSerializer(JobSerializer):
    nodes = serializers.SlugRelatedField(slug_field="hostname", many=True, read_only=True)

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "nodes", "config"]


class LogPushResultSerializer(serializers.ModelSerializer):
    class Meta:
        model = SourceRun
        fields = ["id", "status", "received", "stored", "duplicates", "rejected", "rejects"]
