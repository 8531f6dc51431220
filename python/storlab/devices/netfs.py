"""Network file systems, told by their mount type: a path on one is read and written like any
other (storlab measures it as a plain path), but what it measures includes the network and the
server, so the doctor and a run's document say what it is."""
from __future__ import annotations

__all__ = ["network_filesystem"]

# the kernel's own clients, by /proc/self/mountinfo type
_KERNEL = {
    "nfs": "NFS (kernel client)", "nfs4": "NFSv4 (kernel client)", "cifs": "SMB/CIFS (kernel client)",
    "smb3": "SMB3 (kernel client)", "ceph": "CephFS (kernel client)", "lustre": "Lustre",
    "gpfs": "IBM Storage Scale (GPFS)", "beegfs": "BeeGFS", "9p": "9P", "afs": "AFS", "ocfs2": "OCFS2",
    "gfs2": "GFS2", "orangefs": "OrangeFS", "pvfs2": "OrangeFS (PVFS2)",
}
# user-space clients through FUSE: mountinfo's type is fuse.NAME
_FUSE = {
    "glusterfs": "GlusterFS", "sshfs": "SSHFS", "s3fs": "s3fs (an S3 bucket)", "ceph-fuse": "CephFS",
    "rclone": "rclone (a remote store)", "gcsfuse": "Cloud Storage FUSE (a GCS bucket)",
    "goofys": "goofys (an S3 bucket)", "mountpoint-s3": "Mountpoint for Amazon S3", "juicefs": "JuiceFS",
    "lizardfs": "LizardFS", "mfs": "MooseFS", "moosefs": "MooseFS", "beegfs": "BeeGFS", "cvmfs2": "CernVM-FS",
    "davfs": "WebDAV (davfs2)", "nfs": "NFS (fuse-nfs, libnfs)", "blobfuse2": "BlobFuse2 (an Azure container)",
}


def network_filesystem(fs_type: str | None) -> str | None:
    """What network file system a mount type is ("SSHFS, through FUSE"), or None for a local one
    (a FUSE file system storlab does not know as a network one is None too)."""
    if not fs_type:
        return None
    if fs_type.startswith("fuse.") or fs_type.startswith("fuseblk."):
        name = _FUSE.get(fs_type.split(".", 1)[1])
        return f"{name}, through FUSE" if name else None
    return _KERNEL.get(fs_type)
