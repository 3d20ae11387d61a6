#!/usr/bin/env bash
# End-to-end checks of the packrat command on a real exported model:
# run (files, JSON, output files), profile, plan, run --plan, and the errors.
# usage: cli.sh PACKRAT MODELS_DIR
set -u
PACKRAT=$1
MODELS=$(cd "$2" && pwd)
M=$MODELS/resnet50
. "$(dirname "$0")/lib.sh"
export PACKRAT_CACHE=$tmp/cache
# a command's output is read back from $tmp/out (last_json); a failing
# command must say why on stderr
CHECK_OUT=$tmp/out CHECK_ERR=$tmp/err EXPECT_MESSAGE=1
last_json() { tail -1 "$tmp/out"; }

check_cmd "run --input-dir --output-dir --json" "$PACKRAT" run "$M/model.onnx" --input-dir "$M/test_data_set_0" \
  --output-dir "$tmp/o" --repeat 3 --json
cp "$tmp/out" "$tmp/run.out"
check_cmd "run json has the fields" /usr/bin/python3 -c "
import json,sys; d=json.loads(open('$tmp/run.out').read().strip().splitlines()[-1])
assert all(k in d for k in ('median_ms','p90_ms','min_ms','threads','batch')), d
assert d['batch']==1 and d['threads']==1 and d['min_ms']<=d['median_ms']<=d['p90_ms']"
check_cmd "output files written" test -s "$tmp/o/output_0.pb" -a -s "$tmp/o/output_0.npy"
check_cmd "random inputs at batch 2, 2 threads" "$PACKRAT" run "$M/model.onnx" --batch 2 --threads 2 --json
check_cmd "profile to a file" "$PACKRAT" profile "$M/model.onnx" --cores 2 --max-batch 2 --out "$tmp/p.json"
check_cmd "profile has 4 points" /usr/bin/python3 -c "
import json; d=json.load(open('$tmp/p.json')); assert d['cores']==2 and len(d['points'])==4, d
assert len(d['model_sha256'])==64"
check_cmd "plan --json" "$PACKRAT" plan --profile "$tmp/p.json" --batch 2 --json --plot "$tmp/plan.svg"
last_json >"$tmp/plan.json"
check_cmd "plan json has the fields" /usr/bin/python3 -c "
import json; d=json.loads(open('$tmp/plan.json').read())
assert d['batch']==2 and d['cores']==2 and sum(i['batch'] for i in d['instances'])==2
assert sum(i['threads'] for i in d['instances'])<=2 and d['solve_ms']>=0 and 'fat_latency_ms' in d
assert d['latency_ms']==max(i['latency_ms'] for i in d['instances'])"
check_cmd "plot is an SVG" grep -q "<svg" "$tmp/plan.svg"
check_cmd "run --plan FILE" "$PACKRAT" run "$M/model.onnx" --batch 2 --plan "$tmp/plan.json" --json
check_cmd "run --plan spec, outputs match the reference" "$PACKRAT" run "$M/model.onnx" \
  --input-dir "$M/test_data_set_1" --plan 1x3,1x5 --output-dir "$tmp/q"
check_cmd "planned outputs equal PyTorch's" /usr/bin/python3 -c "
import numpy as np, onnx
from onnx import numpy_helper
a=np.load('$tmp/q/output_0.npy'); b=numpy_helper.to_array(onnx.load_tensor('$M/test_data_set_1/output_0.pb'))
assert np.abs(a-b).max() <= 1e-4*np.abs(b).max()"
expect_status "plan for an unprofiled batch fails" 1 "$PACKRAT" plan --profile "$tmp/p.json" --batch 5 --cores 1
# the joint plan of two profiles: the cores divided, each model's batch on its share
check_cmd "joint plan --json" "$PACKRAT" plan --profile "$tmp/p.json" --profile "$tmp/p.json" \
  --batch 2,1 --weight 1,2 --json --plot "$tmp/joint.svg"
last_json >"$tmp/joint.json"
check_cmd "joint plan: disjoint shares, every instance on its own" /usr/bin/python3 -c "
import json; d=json.loads(open('$tmp/joint.json').read()); a, b = d['models']
assert d['cores']==2 and a['cores']+b['cores']<=2 and a['first_core']+a['cores']<=b['first_core']
assert [m['batch'] for m in d['models']]==[2,1] and d['worst_score']==max(a['score'], b['score'])
for m in d['models']:
    assert sum(i['batch'] for i in m['instances'])==m['batch']
    assert sum(i['threads'] for i in m['instances'])<=m['cores']"
check_cmd "joint plot is an SVG with a box per core" sh -c "[ \$(grep -c \"class='core'\" '$tmp/joint.svg') = 2 ]"
expect_status "joint plan: a list that does not match the profiles" 2 "$PACKRAT" plan \
  --profile "$tmp/p.json" --profile "$tmp/p.json" --batch 2,1,1
expect_status "joint plan: more models than cores" 1 "$PACKRAT" plan --profile "$tmp/p.json" \
  --profile "$tmp/p.json" --profile "$tmp/p.json" --batch 1
expect_status "missing model" 1 "$PACKRAT" run "$tmp/none.onnx"
expect_status "corrupt model" 1 sh -c "head -c 1000 '$M/model.onnx' > '$tmp/bad.onnx' && '$PACKRAT' run '$tmp/bad.onnx'"
expect_status "bad flag value" 2 "$PACKRAT" run "$M/model.onnx" --threads zero
expect_status "unknown flag" 2 "$PACKRAT" run "$M/model.onnx" --frobnicate
expect_status "wrong input shape" 1 "$PACKRAT" run "$M/model.onnx" --input "input=$M/test_data_set_0/output_0.pb"
expect_status "plan wider than the machine" 1 "$PACKRAT" run "$M/model.onnx" --batch 2 --plan 999x2
# a model with a named symbolic dimension besides the batch: x[batch, sequence, 4] -> y[batch, 4]
/usr/bin/python3 -c "
import onnx
from onnx import TensorProto, helper
g = helper.make_graph([helper.make_node('ReduceSum', ['x'], ['y'], axes=[1], keepdims=0)], 'seq',
    [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['batch', 'sequence', 4])],
    [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['batch', 4])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 11)]), '$tmp/seq.onnx')"
expect_status "symbolic dim without --dim fails" 1 "$PACKRAT" run "$tmp/seq.onnx"
cp "$tmp/err" "$tmp/seq.err"
check_cmd "the error names the dimension" grep -q "sequence" "$tmp/seq.err"
check_cmd "run --dim sequence=7" "$PACKRAT" run "$tmp/seq.onnx" --dim sequence=7 --batch 2 --json
cp "$tmp/out" "$tmp/seq.out"
check_cmd "output shape [2, 4]" grep -q "FLOAT \[2, 4\]" "$tmp/seq.out"
expect_status "--dim without a value" 2 "$PACKRAT" run "$tmp/seq.onnx" --dim sequence
expect_status "--dim of zero" 2 "$PACKRAT" run "$tmp/seq.onnx" --dim sequence=0
check_cmd "profile --dim sequence=3" "$PACKRAT" profile "$tmp/seq.onnx" --dim sequence=3 --cores 1 --max-batch 1
grep -o -- '-> .*' "$tmp/out" >"$tmp/path3"
check_cmd "profile --dim sequence=5" "$PACKRAT" profile "$tmp/seq.onnx" --dim sequence=5 --cores 1 --max-batch 1
grep -o -- '-> .*' "$tmp/out" >"$tmp/path5"
check_cmd "profiles of other dim values are cached apart" sh -c "test -s '$tmp/path3' && ! cmp -s '$tmp/path3' '$tmp/path5'"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
