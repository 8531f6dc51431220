"""`storlab diagnose`: measure a storage stack layer by layer against what the layer below
predicts, and name where it loses.

stack.py discovers the layers below a target (the doctor's inventory), probes.py measures them
with the engine (reads only on devices that hold data), expect.py predicts each layer from the
one measured below it with the stack model, findings.py names the losses, run.py joins the steps
within a time budget and builds the `storlab.diagnose/1` document. fabric.py does the same for a
network target across the fabric (server storage, fabric, protocol, clients) under mpiexec.
"""
