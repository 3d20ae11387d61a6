#!/usr/bin/python3
"""RNN, GRU and LSTM against ONNX Runtime on cases bigger than the node tests:
several steps, batch > 1, both directions, sequence_lens, peepholes, clip,
custom activations, linear_before_reset, omitted outputs. Each case is
written as a node-test folder (model, inputs, ONNX Runtime's outputs) and the
conformance runner checks packrat on them. ONNX Runtime has no layout 1
recurrent kernels: a layout-1 twin of a case gets the transposed inputs and
outputs of its layout-0 run.

usage: run.py RUNNER ORT_RUN_JS NODE_MODULES OUT_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

runner, ort_run, node_modules, root = sys.argv[1:5]
shutil.rmtree(root, ignore_errors=True)
rng = np.random.default_rng(0)
def case(name, op, S, B, I, H, dirs, layout=0, _t=None, seq=None, attrs={}, outs=('Y','Y_h','Y_c'), peep=False, init_c=True, opset=14):
    G={'RNN':1,'GRU':3,'LSTM':4}[op]
    direction={1:'forward',2:'bidirectional'}[dirs] if 'direction' not in attrs else attrs['direction']
    attrs=dict(attrs); attrs['direction']=direction; attrs['hidden_size']=H
    lay=layout; layout=0
    X=rng.standard_normal((S,B,I)).astype(np.float32)
    W=(rng.standard_normal((dirs,G*H,I))*0.4).astype(np.float32)
    R=(rng.standard_normal((dirs,G*H,H))*0.4).astype(np.float32)
    Bb=(rng.standard_normal((dirs,2*G*H))*0.3).astype(np.float32)
    hshape=(B,dirs,H) if layout else (dirs,B,H)
    h0=(rng.standard_normal(hshape)*0.5).astype(np.float32)
    inits=[numpy_helper.from_array(W,'W'),numpy_helper.from_array(R,'R'),numpy_helper.from_array(Bb,'B')]
    ins=['X','W','R','B']
    if seq is not None:
        inits.append(numpy_helper.from_array(np.array(seq,np.int32),'seq')); ins.append('seq')
    else: ins.append('')
    ins.append('h0')
    gin=[helper.make_tensor_value_info('X',TensorProto.FLOAT,X.shape),helper.make_tensor_value_info('h0',TensorProto.FLOAT,h0.shape)]
    feeds={'X':X,'h0':h0}
    if op=='LSTM':
        c0=(rng.standard_normal(hshape)*0.5).astype(np.float32)
        if init_c:
            ins.append('c0'); gin.append(helper.make_tensor_value_info('c0',TensorProto.FLOAT,c0.shape)); feeds['c0']=c0
        else: ins.append('')
        if peep:
            P=(rng.standard_normal((dirs,3*H))*0.3).astype(np.float32)
            inits.append(numpy_helper.from_array(P,'P')); ins.append('P')
    nout={'RNN':2,'GRU':2,'LSTM':3}[op]
    outs=[o if o in outs else '' for o in ['Y','Y_h','Y_c'][:nout]]
    while outs and outs[-1]=='': outs.pop()
    node=helper.make_node(op,ins,outs,**attrs)
    gout=[helper.make_tensor_value_info(o,TensorProto.FLOAT,None) for o in outs if o]
    g=helper.make_graph([node],name,gin,gout,inits)
    m=helper.make_model(g,opset_imports=[helper.make_opsetid('',opset)])
    d=os.path.join(root,'test_'+name); os.makedirs(os.path.join(d,'test_data_set_0'),exist_ok=True)
    onnx.save(m,os.path.join(d,'model.onnx'))
    args=[]
    for k,(nm,v) in enumerate(feeds.items()):
        np.save(os.path.join(d,nm+'.npy'),v); args.append(f'{nm}={os.path.join(d,nm+".npy")}')
        with open(os.path.join(d,'test_data_set_0',f'input_{k}.pb'),'wb') as f: f.write(numpy_helper.from_array(v,nm).SerializeToString())
    subprocess.run(['node',ort_run,os.path.join(d,'model.onnx'),d]+args,check=True,env=dict(os.environ,NODE_MODULES=node_modules))
    idx=json.load(open(os.path.join(d,'ort.json'))) if os.path.exists(os.path.join(d,'ort.json')) else None
    for k,o in enumerate([o for o in outs if o]):
        arr=np.fromfile(os.path.join(d,f'ort_{k}.bin'),np.float32)
        shp=[e['dims'] for e in idx if e['name']==o][0] if idx else None
        arr=arr.reshape(shp)
        with open(os.path.join(d,'test_data_set_0',f'output_{k}.pb'),'wb') as f: f.write(numpy_helper.from_array(arr,o).SerializeToString())
        if lay:
            arr=arr.transpose(2,0,1,3) if o=='Y' else arr.transpose(1,0,2)
            os.makedirs(os.path.join(d+'_layout1','test_data_set_0'),exist_ok=True)
            with open(os.path.join(d+'_layout1','test_data_set_0',f'output_{k}.pb'),'wb') as f: f.write(numpy_helper.from_array(np.ascontiguousarray(arr),o).SerializeToString())
    if lay:
        d1=d+'_layout1'
        for k,(nm,v) in enumerate(feeds.items()):
            v=v.transpose(1,0,2)
            with open(os.path.join(d1,'test_data_set_0',f'input_{k}.pb'),'wb') as f: f.write(numpy_helper.from_array(np.ascontiguousarray(v),nm).SerializeToString())
        for gi in m.graph.input:
            dims=gi.type.tensor_type.shape.dim
            a,b_=dims[0].dim_value,dims[1].dim_value; dims[0].dim_value=b_; dims[1].dim_value=a
        m.graph.node[0].attribute.append(helper.make_attribute('layout',1))
        onnx.save(m,os.path.join(d1,'model.onnx'))
case('lstm_bidi_seq_peep','LSTM',7,3,5,6,2,seq=[7,4,1],peep=True)
case('lstm_bidi_layout1','LSTM',6,4,3,5,2,layout=1,attrs={'activations':['HardSigmoid','Tanh','Softsign','Sigmoid','LeakyRelu','Tanh'],'activation_alpha':[0.3,0.05],'activation_beta':[0.4]})
case('lstm_rev_clip_yh','LSTM',9,2,4,8,1,attrs={'direction':'reverse','clip':0.7,'input_forget':1},outs=('Y_h','Y_c'),init_c=False)
case('gru_bidi_seq','GRU',8,3,5,7,2,seq=[8,2,5])
case('gru_bidi_lbr_layout1','GRU',5,3,4,6,2,layout=1,seq=[5,3,1],attrs={'linear_before_reset':1})
case('gru_rev_relu','GRU',6,2,3,4,1,attrs={'direction':'reverse','activations':['Sigmoid','Relu'],'clip':2.0},outs=('Y_h',))
case('rnn_bidi_seq','RNN',7,4,3,5,2,seq=[7,1,3,6])
case('rnn_fwd_opset7','RNN',4,2,3,3,1,opset=7)
case('lstm_big','LSTM',20,8,32,48,2,seq=[20,19,5,1,20,7,12,3])

out = subprocess.run([runner, root, "--verbose", "--threads", "2"], capture_output=True, text=True)
print(out.stdout + out.stderr)
last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
n_cases = len([d for d in os.listdir(root) if d.startswith("test_")])
sys.exit(0 if last == f"{n_cases} passed, 0 failed, 0 skipped" else 1)
